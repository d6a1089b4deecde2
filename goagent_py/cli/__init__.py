"""The ``goagent-py`` command and the plumbing its applications share.

``main.py`` is the command itself (argument parsing, the chat REPL, dispatch to ``rag``,
``mcp``, ``serve`` and ``code``); the private modules are what chat, serve, ``mcp serve`` and
the coding agent share: provider choice and exit codes (``_common``), memory and the
small-model kit (``_setup``), line input (``_input``), the built-in tools (``_tools``) and the
``rag`` commands (``_rag``).
"""
