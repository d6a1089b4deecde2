// goagent-py built-in chat: no framework, no CDN. Talks to /api and reads AG-UI events over SSE.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  // decisions: the person's choices on the calls that wait, sent together once every card
  // is decided (the server takes a turn's decisions in one request).
  // run: the run this page streams now; dropped: the last one whose stream broke off.
  // seen: the open thread's updated_at when this tab last showed it (live updates reload it
  // when the server's is newer).
  const state = {
    thread: null, runId: null, controller: null, running: false, decisions: {}, run: null,
    dropped: null, seen: null, runs: 0, following: null,
  };
  // The connection (docs/serve.md, "A stream that breaks off"): lost from the first failed
  // request until the server answers again; meanwhile a notice says so and nothing is sent.
  const conn = { lost: false, looping: false, wake: null };
  const LOST = "the connection to the server was lost";
  const STALLED = "stalled";  // the reason the page gives when it ends a silent stream

  // What a tool call carries is shown as written: control characters and the Unicode
  // bidirectional overrides and isolates (which reorder what the person reads, so that
  // "notes\u202etxt.exe" reads "notesexe.txt") become escapes, as the terminal shows them
  // (docs/security.md). Newlines, tabs and the CR of a CRLF stay.
  const CONTROL = /\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  const NAMED = { "\r": "\\r", "\x1b": "\\e", "\b": "\\b", "\v": "\\v", "\f": "\\f" };
  const escaped = (c) => NAMED[c] || (c.charCodeAt(0) < 0x100
    ? "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0")
    : "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  function shown(text) {
    return String(text).replace(CONTROL, escaped);
  }
  // Everything else the page shows (answers, thinking, titles, memories, errors) gets the same
  // for the controls and for the overrides and isolates that reorder what is read; newlines,
  // tabs and CRs stay (an answer streams in pieces: a CRLF may come in two), and so do the
  // marks (U+200E, U+200F, U+061C) that right-to-left writing uses.
  const SPOOFING = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/g;
  const plain = (text) => String(text).replace(SPOOFING, escaped);
  const argsText = (args) => shown(JSON.stringify(args, null, 2));

  async function api(path, options = {}) {
    const init = { method: options.method || "GET", headers: {}, credentials: "same-origin" };
    if (options.body !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(options.body);
    }
    if (options.signal) init.signal = options.signal;
    let response;
    try {
      response = await fetch(path, init);
    } catch (error) {
      // No answer at all (the server is down, the network is gone): not this request's fault.
      if (error.name !== "TypeError") throw error;
      connectionLost();
      throw new Error(LOST);
    }
    // A proxy in front of a server that is down answers for it.
    if (response.status === 502 || response.status === 503 || response.status === 504) {
      connectionLost();
      throw new Error(LOST);
    }
    if (options.raw && response.ok) return response;
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      // The login session ended (logout in another tab, expiry, a removed user): back to the
      // form, not an error line under a chat that can do nothing more.
      if (response.status === 401 && path !== "/api/login") signedOut(data.error);
      throw new Error(data.error || response.statusText);
    }
    return data;
  }

  function signedOut(message) {
    if (state.controller) state.controller.abort();
    stopChanges();
    conn.lost = false;
    $("offline").hidden = true;
    state.thread = null;
    state.decisions = {};
    $("messages").replaceChildren();
    $("threads").replaceChildren();
    $("app").hidden = true;
    $("login").hidden = false;
    $("login-secret").value = "";
    $("login-error").textContent = plain(message || "");
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = plain(text);
    return node;
  }

  function status(text, isError) {
    $("status").textContent = plain(text || "");
    $("status").className = isError ? "error" : "";
  }

  // Once per burst of changes (a thread's whole history, a network read's events), not per
  // element: reading scrollHeight lays the page out, and a long thread was laid out once per
  // message it held (quadratic: 4,000 messages froze the page).
  let scrollQueued = false;
  function scroll() {
    if (scrollQueued) return;
    scrollQueued = true;
    queueMicrotask(() => {
      scrollQueued = false;
      $("messages").scrollTop = $("messages").scrollHeight;
    });
  }

  function bubble(role, text) {
    const node = el("div", "msg " + role);
    const body = el("span", "text", text || "");
    node.appendChild(body);
    $("messages").appendChild(node);
    scroll();
    return node;
  }

  function toolCard(id, name) {
    const card = el("details", "tool");
    card.dataset.callId = id;
    card.dataset.name = name;
    card.appendChild(cardSummary("tool", shown(name) + " …"));
    card.appendChild(el("pre", "args", ""));
    card.appendChild(el("pre", "result", ""));
    card.open = true;
    $("messages").appendChild(card);
    scroll();
    return card;
  }

  // No emoji: a machine without an emoji font would show empty boxes.
  function cardSummary(kind, text) {
    const summary = el("summary");
    summary.appendChild(el("span", "badge", kind));
    summary.appendChild(document.createTextNode(" " + text));
    return summary;
  }

  // A call that waits for the person (docs/approvals.md): Approve, Deny with a reason, and
  // "always for this thread"; the decision resumes the run (its stream, like a message's).
  // token: the wait's (the listing's), sent with the decision, so a click meant for this card
  // is refused if the wait is over, not taken by a later call with the same id (local models
  // number calls per turn: the newest card of an id is the one that waits).
  // deadline: seconds since the epoch, or null; once it passed only Deny is taken, so Approve
  // (and "always") is switched off then, saying why.
  function pendingCard(id, name, args, token, deadline) {
    const same = document.querySelectorAll(`details.tool[data-call-id="${CSS.escape(id)}"]`);
    let card = same.length ? same[same.length - 1] : null;
    if (!card || card.classList.contains("done")) {
      card = toolCard(id, name);
    }
    // What runs is what the server holds: the card shows the waiting call's own arguments,
    // not what streamed before (a stream may have been cut or repeated).
    card.querySelector(".args").textContent = argsText(args);
    if (card.querySelector(".decision")) return card;
    card.open = true;
    card.classList.add("pending");
    card.dataset.token = token || "";
    card.querySelector("summary").replaceWith(cardSummary("approval", shown(name) + " waits for you"));
    const box = el("div", "decision");
    const approve = el("button", "approve", "Approve");
    const reason = el("input", "reason");
    reason.placeholder = "reason (for Deny)";
    const deny = el("button", "deny", "Deny");
    const label = el("label", "always-label");
    const always = el("input", "always");
    always.type = "checkbox";
    label.append(always, document.createTextNode(" always for this thread"));
    approve.type = deny.type = "button";
    box.append(approve, deny, reason, label);
    if (typeof deadline === "number" && isFinite(deadline)) {
      const expire = () => {
        approve.disabled = always.disabled = true;
        approve.title = "the deadline passed: only Deny is taken";
        if (!box.querySelector(".expired")) box.append(el("span", "expired", " the deadline passed: only Deny is taken"));
      };
      const left = deadline * 1000 - Date.now();
      if (left <= 0) expire();
      else setTimeout(expire, Math.min(left, 2147483647));
    }
    card.appendChild(box);
    // A decision made (a click, or kept across a reload of the thread: restoreDecisions).
    card.decided = (decision) => {
      for (const b of box.querySelectorAll("button, input")) b.disabled = true;
      card.classList.remove("pending");
      state.decisions[id] = decision;
    };
    const decide = async (decision) => {
      card.decided(token ? { ...decision, token } : decision);
      const waiting = document.querySelectorAll("details.tool.pending").length;
      if (waiting) {
        status(`decided; ${waiting} more ${waiting === 1 ? "call waits" : "calls wait"} for you`);
        return;
      }
      const decisions = state.decisions;
      state.decisions = {};
      const how = await streamRun(`/api/threads/${state.thread}/decisions`, { decisions });
      if (how === "refused" && state.thread && !conn.lost) await openThread(state.thread);  // the cards as they are
    };
    approve.addEventListener("click", () => decide({ decision: "approve", always: always.checked }));
    deny.addEventListener("click", () => decide({ decision: "deny", message: reason.value.trim() || "The user denied this call." }));
    scroll();
    return card;
  }

  function knownCards() {
    const cards = {};
    for (const card of document.querySelectorAll("details.tool")) {
      cards[card.dataset.callId] = [card, card.dataset.name];
    }
    return cards;
  }

  function finishCard(card, name, content, isError, duration) {
    const box = card.querySelector(".decision");
    if (box) box.remove();
    card.classList.add("done");  // answered: a later call with its id gets a card of its own
    card.querySelector(".result").textContent = shown(content);
    const took = duration === undefined ? "" : " — " + (duration * 1000).toFixed(0) + " ms";
    card.querySelector("summary").replaceWith(cardSummary(isError ? "error" : "tool", shown(name) + took));
    if (isError) card.classList.add("error");
  }

  function showMemories(memories) {
    const list = $("memory-list");
    list.replaceChildren();
    if (!memories.length) list.appendChild(el("li", "muted", "nothing recalled"));
    for (const m of memories) {
      const item = el("li");
      item.appendChild(el("span", "score", m.score.toFixed(3) + " "));
      item.appendChild(el("span", "", m.text));
      if (m.id) {
        const forget = el("button", "forget", "forget");
        forget.title = "Delete this memory";
        forget.addEventListener("click", async () => {
          try {
            await api(`/api/memories/${encodeURIComponent(m.id)}`, { method: "DELETE" });
            item.remove();
            await loadFacts();
          } catch (error) { status(error.message, true); }
        });
        item.appendChild(forget);
      }
      list.appendChild(item);
    }
  }

  // One line of a memory's history: "2026-11-27 08:01 updated by rules: "I live in Lisbon." → "I live in Porto.""
  function changeLine(c) {
    const said = (text) => "\u201c" + text + "\u201d";
    const what = {
      add: "added " + said(c.text),
      update: "updated: " + said(c.previous) + " \u2192 " + said(c.text),
      superseded: "replaced by " + said(c.text),
      delete: "deleted " + said(c.previous || c.text),
      restored: "current again (what replaced it was forgotten)",
    }[c.op] || c.op;
    const item = el("li");
    item.appendChild(el("span", "when", (c.at || "").slice(0, 16).replace("T", " ") + " "));
    item.appendChild(el("span", "", what + (c.decider ? " (by " + c.decider + ")" : "")));
    return item;
  }

  async function loadFacts() {
    const data = await api("/api/memories/history").catch((error) => {
      status(error.message, true);
      return { enabled: false, memories: [] };
    });
    // No long-term memory here, or one that cannot list: the section stays hidden.
    for (const id of ["facts-title", "facts-hint", "fact-list"]) $(id).hidden = !data.enabled;
    const memories = data.memories;
    const list = $("fact-list");
    list.replaceChildren();
    if (!memories.length) list.appendChild(el("li", "muted", "nothing remembered yet"));
    for (const m of memories) {
      const item = el("li");
      item.dataset.memoryId = m.id;
      const fact = el("details", "fact");
      const summary = el("summary", "", m.text);
      const n = m.history.length;
      summary.appendChild(el("span", "changes", n === 1 ? "1 change" : n + " changes"));
      fact.appendChild(summary);
      const history = el("ol", "history");
      for (const c of m.history) history.appendChild(changeLine(c));
      fact.appendChild(history);
      item.appendChild(fact);
      list.appendChild(item);
    }
  }

  // The thread's title as the server holds it (Rename starts from it), shown escaped.
  function showTitle(title) {
    state.title = title === undefined ? state.title : title;
    $("thread-title").textContent = plain(state.title || "");
  }

  // adopt: the open thread's updated_at is what this tab shows (it just opened it, or its own
  // run ended), so live updates do not reload it for that.
  async function loadThreads(adopt) {
    const { threads } = await api("/api/threads");
    const open = threads.find((t) => t.id === state.thread);
    if (adopt && open) state.seen = open.updated_at;
    const list = $("threads");
    list.replaceChildren();
    for (const t of threads) {
      // The server names a new thread after its first message.
      if (t.id === state.thread) showTitle(t.title);
      // A button in each item: the keyboard reaches it (Tab) and opens it (Enter, Space).
      const item = el("li", t.id === state.thread ? "active" : "");
      const open = el("button", "thread", t.title);
      open.type = "button";
      open.title = plain(t.title);
      if (t.id === state.thread) open.setAttribute("aria-current", "true");
      open.addEventListener("click", () => openThread(t.id, t.title).catch((e) => status(e.message, true)));
      item.appendChild(open);
      list.appendChild(item);
    }
    return threads;
  }

  // While a run streams, its events paint this chat: another thread opens once it is over.
  const BUSY = "a run is going on here: wait for it, or Stop it, before opening another chat";

  async function openThread(id, title) {
    if (state.running) {
      if (id !== state.thread) status(BUSY);
      return;
    }
    unfollow();
    const again = id === state.thread;
    state.thread = id;
    showTitle(title);
    localStorage.setItem("goagent.thread", id);
    const { messages, pending } = await api(`/api/threads/${id}/messages`);
    if (state.thread !== id || state.running) return messages;  // another click meanwhile
    // The same thread again (a change elsewhere, a reconnect): what the person had started
    // deciding on the cards that still wait stays (checked boxes, a reason, a choice made).
    const held = again ? heldDecisions() : {};
    state.decisions = {};
    render(messages);
    for (const p of pending || []) {
      const card = pendingCard(p.id, p.name, p.arguments, p.token, p.deadline);
      restoreDecision(card, held[p.id], p.token);
    }
    const threads = await loadThreads(true);
    const open = threads.find((t) => t.id === id);
    if (open && open.running && !state.running && state.thread === id) follow(id);
    return messages;
  }

  // The stored messages as the chat shows them (the cards of waiting calls aside).
  function render(messages) {
    $("messages").replaceChildren();
    const cards = {};
    for (const m of messages) {
      if (m.role === "user") bubble("user", m.text);
      else if (m.role === "assistant") {
        if (m.thinking) $("messages").appendChild(el("div", "msg assistant thinking", m.thinking));
        if (m.text) bubble("assistant", m.text);
        for (const c of m.tool_calls || []) {
          const card = toolCard(c.id, c.name);
          card.querySelector(".args").textContent = argsText(c.arguments);
          card.open = false;
          cards[c.id] = [card, c.name];
        }
      } else if (m.role === "tool" && cards[m.tool_call_id]) {
        const [card, name] = cards[m.tool_call_id];
        finishCard(card, name, m.text, m.is_error, m.duration);
      }
    }
  }

  // The decisions begun on the cards that wait: by call id, with the wait's token.
  function heldDecisions() {
    const held = {};
    for (const card of document.querySelectorAll("details.tool")) {
      const box = card.querySelector(".decision");
      if (!box) continue;
      const focused = box.contains(document.activeElement) ? document.activeElement : null;
      held[card.dataset.callId] = {
        token: card.dataset.token || "",
        decision: state.decisions[card.dataset.callId],
        reason: box.querySelector(".reason").value,
        always: box.querySelector(".always").checked,
        focus: focused ? focused.className : "",
        caret: focused && focused.selectionStart !== undefined ? focused.selectionStart : null,
      };
    }
    return held;
  }

  // Only on the same wait (its token): a later call with the same id starts afresh.
  function restoreDecision(card, held, token) {
    const box = card.querySelector(".decision");
    if (!held || !box || held.token !== (token || "")) return;
    box.querySelector(".reason").value = held.reason;
    const always = box.querySelector(".always");
    if (!always.disabled) always.checked = held.always;
    if (held.decision) {
      card.decided(held.decision);
    } else if (held.focus) {
      const focus = box.querySelector("." + held.focus.split(" ")[0]);
      if (focus) {
        focus.focus();
        if (held.caret !== null && focus.setSelectionRange) focus.setSelectionRange(held.caret, held.caret);
      }
    }
  }

  async function newThread() {
    if (state.running) {
      status(BUSY);
      return;
    }
    const thread = await api("/api/threads", { method: "POST", body: {} });
    await openThread(thread.id, thread.title);
    $("input").focus();
  }

  function setRunning(running) {
    if (running) state.runs += 1;
    state.running = running;
    showBusy();
  }

  // A run of this tab's, or one it follows: Stop stops it, a message steers it.
  function showBusy() {
    const busy = state.running || Boolean(state.following);
    $("stop").disabled = !busy;
    $("send").textContent = busy ? "Steer" : "Send";
  }

  // An answer's text is appended piece by piece (one text node per network read, not the
  // whole text rewritten per delta: a long answer made that quadratic).
  function flushText(ctx) {
    if (ctx.bubble && ctx.pending) {
      ctx.bubble.querySelector(".text").appendChild(document.createTextNode(plain(ctx.pending)));
      scroll();
    }
    ctx.pending = "";
  }

  function handle(event, ctx) {
    if (event.type !== "TEXT_MESSAGE_CONTENT") flushText(ctx);
    switch (event.type) {
      case "RUN_STARTED":
        if (ctx.follower) {
          ctx.runId = event.runId;
          status(FOLLOWING);
        } else {
          state.runId = event.runId;
          status("working…");
        }
        break;
      case "TEXT_MESSAGE_START":
        ctx.bubble = bubble("assistant", "");
        break;
      case "TEXT_MESSAGE_CONTENT":
        if (!ctx.bubble) ctx.bubble = bubble("assistant", "");
        if (ctx.firstToken === undefined && !ctx.follower) {
          ctx.firstToken = performance.now() - ctx.sent;
          document.body.dataset.ttftMs = ctx.firstToken.toFixed(1);
        }
        ctx.pending += event.delta;
        break;
      case "TEXT_MESSAGE_END":
        ctx.bubble = null;
        break;
      case "REASONING_MESSAGE_START":
        ctx.thinking = el("div", "msg assistant thinking", "");
        $("messages").appendChild(ctx.thinking);
        break;
      case "REASONING_MESSAGE_CONTENT":
        if (ctx.thinking) ctx.thinking.appendChild(document.createTextNode(plain(event.delta)));
        break;
      case "TOOL_CALL_START":
        ctx.cards[event.toolCallId] = [toolCard(event.toolCallId, event.toolCallName), event.toolCallName];
        break;
      case "TOOL_CALL_ARGS": {
        const entry = ctx.cards[event.toolCallId];
        if (entry) entry[0].querySelector(".args").appendChild(document.createTextNode(shown(event.delta)));
        break;
      }
      case "TOOL_CALL_RESULT": {
        const entry = ctx.cards[event.toolCallId];
        const meta = event.metadata || {};
        if (entry) finishCard(entry[0], entry[1], event.content, meta.isError, meta.duration);
        break;
      }
      case "CUSTOM":
        if (event.name === "goagent.memory_recall") showMemories(event.value.memories);
        else if (event.name === "goagent.not_taken") ctx.note = notTaken(event.value.messages || [], ctx.run);
        else if (event.name === "goagent.steered") steered(event.value.messages || [], ctx.run);
        break;
      case "RUN_FINISHED": {
        ctx.ended = true;
        if (event.outcome && event.outcome.type === "interrupt") {
          for (const i of event.outcome.interrupts) {
            const meta = i.metadata || {};
            const due = i.expiresAt ? Date.parse(i.expiresAt) / 1000 : null;
            pendingCard(i.toolCallId || i.id, meta.toolName || "tool", meta.arguments || {}, meta.token, due);
          }
          status("waiting for your decision" + (ctx.note || ""), Boolean(ctx.note));
          break;
        }
        const took = ctx.firstToken === undefined ? "" : ` (first token ${ctx.firstToken.toFixed(0)} ms)`;
        status((event.result && event.result.stopReason === "aborted" ? "stopped" : "done") + took + (ctx.note || ""), Boolean(ctx.note));
        break;
      }
      case "RUN_ERROR":
        ctx.ended = true;
        status(event.message + (ctx.note || ""), true);
        break;
    }
  }

  async function send(text) {
    const mine = bubble("user", text);
    const how = await streamRun(`/api/threads/${state.thread}/runs`, { message: text }, text);
    // Refused (a run of this thread going on in another tab, a lost session): nothing was
    // stored, so the page does not show the message as sent. It goes back into the input.
    // (A dropped run's messages are checked against what the server kept: resync.)
    if (how === "refused") {
      mine.remove();
      giveBack([text]);
    }
  }

  // How the run's request ended: "done" (the stream ended), "refused" (an error answer: no
  // run started) or "dropped" (no answer, the stream broke off or went silent, or Stop).
  // ``message``: the person's message that starts the run, if any.
  async function streamRun(path, body, message) {
    setRunning(true);
    const controller = new AbortController();
    state.controller = controller;
    // What the person sent in this run (its message, then what steered it): a dropped run's
    // messages are checked against what the server kept.
    // steers: the bubbles of what steered it, with their text (taken back if the run did
    // not take them).
    // unsure: steers sent without an answer (the connection broke): kept or not, unknown.
    const run = { thread: state.thread, sent: message ? [message] : [], steers: [], unsure: [] };
    state.run = run;
    const ctx = {
      cards: knownCards(), bubble: null, pending: "", thinking: null, sent: performance.now(), run,
    };
    let how = "refused";
    let quiet = null;
    try {
      let response;
      try {
        response = await api(path, { method: "POST", body, raw: true, signal: controller.signal });
      } catch (error) {
        if (conn.lost) how = "dropped";  // the request may have reached the server
        throw error;
      }
      how = "dropped";
      // The server writes a keep-alive comment when a run is quiet (a long tool call): a
      // stream silent for much longer than that is a connection that broke without a reset
      // or a server that hangs, which nothing else would ever tell the page.
      const ping = Number(response.headers.get("x-goagent-ping-seconds")) || 15;
      const silent = (2 * ping + 10) * 1000;
      const watch = () => {
        clearTimeout(quiet);
        quiet = setTimeout(() => controller.abort(STALLED), silent);
      };
      watch();
      await readEvents(response, ctx, watch);
      // A stream that ends without RUN_FINISHED or RUN_ERROR was cut (a server shutting down
      // closes it cleanly).
      how = ctx.ended ? "done" : "dropped";
    } catch (error) {
      // Refused: the server's reason. A stream that broke off: the notice says so instead.
      if (how === "refused" && error.name !== "AbortError" && !conn.lost) status(error.message, true);
    } finally {
      clearTimeout(quiet);
      setRunning(false);
      state.controller = null;
      if (state.run === run) state.run = null;
      if (how === "dropped" && controller.signal.aborted && controller.signal.reason !== STALLED) {
        how = "aborted";  // signed out: nothing to recover
      }
      if (!$("app").hidden && !conn.lost && how !== "dropped") {
        await loadThreads(how !== "refused").catch(() => {});
        await loadFacts();
      }
    }
    if (how === "dropped") {
      state.dropped = run;
      connectionLost();
    } else if (run.unsure.length && how === "done" && state.thread === run.thread) {
      await settleUnsure(run);
    }
    return how;
  }

  // The AG-UI events of a run's stream, handled as they come (``watch`` at every read).
  async function readEvents(response, ctx, watch) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      watch();
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
        const data = frame.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
        if (!data) continue;
        const event = JSON.parse(data);
        if (event.type === "CUSTOM" && event.name === "goagent.following" && ctx.follower) {
          flushText(ctx);
          await ctx.from(event.value);
        } else {
          handle(event, ctx);
        }
      }
      flushText(ctx);
    }
  }

  // A run in the open thread that this tab did not start (another tab's, another client's),
  // followed live (docs/serve.md, "Several tabs"): the thread as it was when the run began,
  // then the run's events from its first. Leaving (another thread, a reload) does nothing to
  // the run; when it ends the thread is shown as stored.
  const FOLLOWING = "a reply is being written in another tab or client";

  // Every shown tab follows, and of the hidden tabs of this browser on the thread one does (a
  // stream each: a browser keeps at most six connections to one server, and six tabs
  // following would leave none). The hidden one holds the thread's slot (a Web Lock shared by
  // the browser's tabs): the run goes on while any tab follows it, so closing the tab that
  // started it leaves it running for the others. Another hidden tab waits for the slot (it
  // follows when the holder goes), and a tab shown catches up: the thread as it was when the
  // run began, then the run's events from its first.
  const slot = { thread: null, abort: null, release: null };

  function dropSlot() {
    if (slot.abort) slot.abort.abort();
    if (slot.release) slot.release();
    slot.thread = slot.abort = slot.release = null;
  }

  // The browser's hidden-follower slot of ``thread``: ``now`` takes it only if free (false
  // when not); otherwise waits for it and then follows the thread's run, if there still is one.
  function takeSlot(thread, now) {
    if (!navigator.locks) return Promise.resolve(false);  // not a secure context: no slot
    if (slot.thread === thread && (slot.release || !now)) return Promise.resolve(Boolean(slot.release));
    dropSlot();
    const abort = new AbortController();
    slot.thread = thread;
    slot.abort = abort;
    return new Promise((resolve) => {
      const options = now ? { ifAvailable: true } : { signal: abort.signal };
      navigator.locks.request(`goagent.follow.${thread}`, options, (lock) => {
        if (slot.abort !== abort || !lock || !document.hidden) {
          if (slot.abort === abort) slot.thread = slot.abort = null;
          resolve(false);
          return undefined;
        }
        return new Promise((release) => {
          slot.release = release;
          resolve(true);
          if (now) return;
          // Waited for: this tab follows the run now (or finds none and lets go).
          follow(thread).finally(() => {
            if (slot.release === release && state.following === null) dropSlot();
          });
        });
      }).catch(() => resolve(false));
    });
  }

  async function follow(thread) {
    if (state.running || state.following || conn.lost || state.thread !== thread) return;
    if (document.hidden && !(slot.thread === thread && slot.release)) {
      takeSlot(thread, false);
      return;
    }
    const controller = new AbortController();
    const me = { thread, controller };
    state.following = me;
    showBusy();
    status(FOLLOWING);
    // What this tab sends to steer the run it follows, as for a run of its own.
    const run = { thread, sent: [], steers: [], unsure: [] };
    me.run = run;
    const ctx = {
      cards: knownCards(), bubble: null, pending: "", thinking: null, sent: performance.now(),
      run, follower: true, runId: null,
    };
    ctx.from = async ({ stored, message }) => {
      // Where the run goes on from: the thread's first ``stored`` messages (the rest is in
      // the events), and the message it runs.
      const { messages } = await api(`/api/threads/${thread}/messages`, { signal: controller.signal });
      render(messages.slice(0, stored));
      if (message) bubble("user", message);
      ctx.cards = knownCards();
      ctx.bubble = null;
      ctx.thinking = null;
    };
    let quiet = null;
    let how = "gone";
    try {
      const response = await api(`/api/threads/${thread}/follow`, { raw: true, signal: controller.signal });
      const ping = Number(response.headers.get("x-goagent-ping-seconds")) || 15;
      const watch = () => {
        clearTimeout(quiet);
        quiet = setTimeout(() => controller.abort(STALLED), (2 * ping + 10) * 1000);
      };
      watch();
      how = "dropped";
      await readEvents(response, ctx, watch);
      how = ctx.ended ? "done" : "dropped";
    } catch (error) {
      // No run any more (it ended meanwhile), or left: the thread as stored, below.
    } finally {
      clearTimeout(quiet);
      if (state.following === me) state.following = null;
      showBusy();
    }
    if (controller.signal.aborted && controller.signal.reason !== STALLED) return;  // left
    if (how === "dropped" && !conn.lost) {
      connectionLost();  // the reconnect shows the thread as stored, and follows it again
      return;
    }
    if (slot.thread === thread && slot.release && !state.following) dropSlot();  // its run is over
    if (state.thread === thread && !state.running && !conn.lost) {
      if (run.unsure.length) await settleUnsure(run);
      else await openThread(thread).catch(() => {});
      if (how === "done" && !state.following && !state.running && !run.unsure.length) status("updated");
    }
  }

  function unfollow() {
    dropSlot();
    const following = state.following;
    if (!following) return;
    state.following = null;
    following.controller.abort();
    showBusy();
  }

  // This tab is hidden: it goes on following when it gets the browser's slot at once; else it
  // leaves the stream to the tab that holds it and waits for the slot.
  async function hidden() {
    const following = state.following;
    if (!following) return;
    if (await takeSlot(following.thread, true)) return;
    if (!document.hidden || state.following !== following) return;
    unfollow();
    takeSlot(following.thread, false);
  }

  // The connection is lost: say so at once, and try again until the server answers, however
  // long that takes (sooner when the browser is back online, or on "Retry now").
  function connectionLost() {
    if ($("app").hidden) return;
    if (!conn.lost) {
      conn.lost = true;
      $("offline").hidden = false;
      status("");
    }
    if (!conn.looping) reconnect().catch((error) => status(error.message, true));
  }

  function wakeReconnect() {
    if (conn.wake) conn.wake();
  }

  async function reachable() {
    try {
      const response = await fetch("/api/me", {
        credentials: "same-origin", cache: "no-store", signal: AbortSignal.timeout(10000),
      });
      return response.status < 502 || response.status > 504;
    } catch (error) {
      return false;
    }
  }

  async function reconnect() {
    conn.looping = true;
    try {
      for (let wait = 500; ; wait = Math.min(wait * 2, 5000)) {
        if ((await reachable()) && (await resync())) return;
        if ($("app").hidden) return;  // signed out meanwhile
        await new Promise((resolve) => {
          conn.wake = resolve;
          setTimeout(resolve, wait);
        });
        conn.wake = null;
        if ($("app").hidden) return;
      }
    } finally {
      conn.looping = false;
      conn.wake = null;
    }
  }

  // The server answers again. A run whose stream broke off was stopped on the server (unless
  // another tab follows it), which stored what it had; that is not what this page painted (events were lost on the way), so
  // the thread is shown as the server keeps it, and a message it did not keep goes back into
  // the box. False when the connection broke again meanwhile.
  async function resync() {
    conn.lost = false;
    const me = await api("/api/me").catch(() => null);
    if (conn.lost || me === null) {
      conn.lost = true;
      return false;
    }
    $("offline").hidden = true;
    if (!me.authenticated) {
      signedOut(me.error);
      return true;
    }
    const dropped = state.dropped;
    const thread = state.thread;
    let kept = null;
    if (thread && !state.running) {
      // The server ends the run once it sees the stream gone: wait (a little) for its record
      // (a run of another tab's goes on: followed again once the thread is open).
      const mine = dropped && dropped.thread === thread;
      for (let attempt = 0; mine && attempt < 20 && !conn.lost; attempt++) {
        const found = await api(`/api/threads/${thread}`).catch(() => null);
        if (!found || !found.running) break;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      if (!conn.lost) kept = await openThread(thread).catch(() => null);
    } else {
      await loadThreads().catch(() => {});
    }
    if (!conn.lost) await loadFacts();
    if (conn.lost) {
      $("offline").hidden = false;
      return false;
    }
    state.dropped = null;
    if (!dropped || dropped.thread !== thread || !kept) {
      status("reconnected");
      return true;
    }
    let said = "reconnected; the connection was lost, this is what the server kept";
    const users = kept.filter((m) => m.role === "user").map((m) => m.text);
    const recent = users.slice(-dropped.sent.length - 1);
    const lost = dropped.sent.filter((t) => !recent.includes(t));
    if (lost.length) {
      giveBack(lost);
      said += lost.length === 1
        ? "; your message did not reach it and is back in the box"
        : "; your messages did not reach it and are back in the box";
    }
    status(said, true);
    return true;
  }

  async function submit(event) {
    event.preventDefault();
    const text = $("input").value.trim();
    if (!text) return;
    if (conn.lost) {
      status(LOST + ": your message stays in the box until the server is back", true);
      return;
    }
    $("input").value = "";
    if (state.running || state.following) {
      const mine = bubble("user", text);
      const run = state.running ? state.run : state.following.run;
      // Noted before it is sent: the run may take it (goagent.steered) or give it back
      // (goagent.not_taken) before the answer to this request is read.
      const entry = { text, node: mine };
      if (run) {
        run.sent.push(text);  // kept by the server only if the run takes it
        run.steers.push(entry);
      }
      const forget = () => {
        if (!run) return;
        const i = run.steers.indexOf(entry);
        if (i >= 0) run.steers.splice(i, 1);
        const j = run.sent.lastIndexOf(text);
        if (j >= 0) run.sent.splice(j, 1);
      };
      try {
        await api(`/api/threads/${state.thread}/steer`, { method: "POST", body: { message: text } });
      } catch (error) {
        mine.remove();
        forget();
        if (conn.lost && run && (state.run === run || (state.following && state.following.run === run))) {
          // No answer: the server may have taken it. What it kept is looked at when the run's
          // stream ends (or breaks off): shown if kept, back in the box if not.
          run.sent.push(text);
          run.unsure.push(text);
          return;
        }
        // Refused (the run had just ended): the message goes back.
        giveBack([text]);
        status(error.message, true);
      }
      return;
    }
    try {
      if (!state.thread) await newThread();
    } catch (error) {
      giveBack([text]);
      status(error.message, true);
      return;
    }
    await send(text);
  }

  // The run ended with steers whose answer never came: the thread as the server keeps it, and
  // those it did not keep back in the box.
  async function settleUnsure(run) {
    const kept = await openThread(run.thread).catch(() => null);
    if (!kept) {
      giveBack(run.unsure);  // cannot tell: the person decides
      return;
    }
    const users = kept.filter((m) => m.role === "user").map((m) => m.text);
    const recent = users.slice(-run.sent.length - 1);
    const lost = run.unsure.filter((t) => !recent.includes(t));
    if (lost.length) {
      giveBack(lost);
      status("your last message did not reach the server; it is back in the box", true);
    }
  }

  // Steers the run never took (it was stopped, failed, or stopped for approvals first): their
  // bubbles go, their text goes back into the box (docs/serve.md, "Steering").
  function notTaken(texts, run) {
    const back = [];
    for (const text of texts) {
      if (typeof text !== "string") continue;
      // Only what this tab sent goes back into its box (another tab's steer goes back there).
      const j0 = run ? run.sent.indexOf(text) : 0;
      if (j0 < 0) continue;
      back.push(text);
      if (!run) continue;
      const i = run.steers.findIndex((s) => s.text === text);
      if (i >= 0) run.steers.splice(i, 1)[0].node.remove();
      const j = run.sent.indexOf(text);
      if (j >= 0) run.sent.splice(j, 1);
      const k = run.unsure.indexOf(text);
      if (k >= 0) run.unsure.splice(k, 1);
    }
    if (!back.length) return "";
    giveBack(back);
    return back.length === 1
      ? "; the agent did not take your last message: it is back in the box"
      : "; the agent did not take your last messages: they are back in the box";
  }

  // Steers the run took (CUSTOM goagent.steered): those another tab or client sent are shown
  // where the run took them; this tab's own are on the page already.
  function steered(texts, run) {
    for (const text of texts) {
      if (typeof text !== "string") continue;
      const mine = run ? run.steers.find((s) => s.text === text && !s.taken) : null;
      if (mine) mine.taken = true;
      else bubble("user", text);
    }
  }

  // Messages the server did not take go back into the box, before what was typed since.
  function giveBack(texts) {
    const box = $("input");
    box.value = [...texts, box.value].filter((t) => t).join("\n\n");
  }

  // Live updates (docs/serve.md, "Several tabs"): GET /api/events streams the changes to this
  // user's threads (another tab's or client's run starting and ending, a thread made, renamed
  // or deleted). One tab of this browser holds the stream (a Web Lock) and passes what comes to
  // the others (a BroadcastChannel): a stream per tab would take one of the browser's six
  // connections to this server each, and six tabs would leave none for anything else.
  const live = { source: null, channel: null, holding: false, refreshing: false, again: false };

  function followChanges() {
    if (!live.channel && "BroadcastChannel" in window) {
      live.channel = new BroadcastChannel("goagent.events");
      live.channel.onmessage = (e) => changed(e.data);
    }
    if (live.holding) return;
    live.holding = true;
    if (navigator.locks && live.channel) {
      navigator.locks.request("goagent.events", () => new Promise((release) => openChanges(release)));
    } else {
      openChanges(() => {});  // no locks (a page served over plain http off this machine)
    }
  }

  // Held until signed out (release then lets another tab of this browser take it over).
  function openChanges(release) {
    if ($("app").hidden) {
      live.holding = false;
      release();
      return;
    }
    const source = new EventSource("/api/events");
    live.source = source;
    live.release = release;
    source.onmessage = (e) => {
      let event;
      try { event = JSON.parse(e.data); } catch (error) { return; }
      if (live.channel) live.channel.postMessage(event);
      changed(event);
    };
    source.onerror = () => {
      // EventSource tries again by itself, unless the server refused (signed out, say).
      if (source.readyState !== EventSource.CLOSED) return;
      live.source = null;
      // Refused: a session that ended shows the login form (the server says why).
      api("/api/me").then((me) => { if (!me.authenticated) signedOut(me.error); }).catch(() => {});
      setTimeout(() => { if (live.release === release && !live.source) openChanges(release); }, 5000);
    };
  }

  function stopChanges() {
    if (live.source) live.source.close();
    live.source = null;
    if (live.holding && live.release) live.release();
    live.holding = false;
    live.release = null;
  }

  function changed(event) {
    if ($("app").hidden || !event || typeof event.type !== "string") return;
    const here = event.threadId === state.thread;
    if (event.type === "running") {
      if (here && event.runId !== state.runId && !state.running) follow(state.thread);
      return;
    }
    if (event.type === "ran" && event.runId === state.runId) return;  // this tab's own run
    if (event.type === "deleted" && here && !state.running) {
      state.thread = null;
      state.seen = null;
      $("messages").replaceChildren();
      showTitle("goagent-py");
      status("this chat was deleted in another tab or client");
    }
    refresh();
  }

  // The thread list again, and the open thread when it changed elsewhere (its updated_at is
  // newer than what this tab shows); a burst of changes makes one reload after another.
  async function refresh() {
    if (live.refreshing) {
      live.again = true;
      return;
    }
    live.refreshing = true;
    try {
      do {
        live.again = false;
        // A list read while this tab ran its own run (or started one) says nothing of others:
        // the run's end shows the thread as stored (reloading here replaced the cards the
        // person was clicking).
        const runs = state.runs;
        const idle = !state.running;
        const threads = await loadThreads().catch(() => null);
        const open = threads && threads.find((t) => t.id === state.thread);
        const mine = !idle || state.running || runs !== state.runs;
        const followed = state.following && state.following.thread === (open && open.id);
        if (open && !mine && !followed && !conn.lost && !(open.updated_at <= state.seen)) {
          await openThread(open.id, open.title).catch(() => {});
          if (!state.running && !open.running) status("updated");
        }
      } while (live.again);
    } finally {
      live.refreshing = false;
    }
  }

  async function start() {
    // /api/me answers 200 either way: a 401 would be a console error on every login page.
    const data = await api("/api/me");
    if (!data.authenticated) {
      $("app").hidden = true;
      $("login").hidden = false;
      if (!data.login) $("login-error").textContent = plain(data.error);
      return;
    }
    $("login").hidden = true;
    $("app").hidden = false;
    $("whoami").textContent = plain("signed in as " + data.user);
    $("login-secret").value = "";
    $("login-error").textContent = "";
    // Only a login session can end here (a bearer token, a proxy or no auth: nothing to end).
    $("logout").hidden = !data.session;
    const threads = await loadThreads();
    await loadFacts();
    const last = localStorage.getItem("goagent.thread");
    const pick = threads.find((t) => t.id === last) || threads[0];
    if (pick) await openThread(pick.id, pick.title);
    followChanges();
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("composer").addEventListener("submit", submit);
    $("input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
    });
    $("new-thread").addEventListener("click", () => newThread().catch((e) => status(e.message, true)));
    $("reconnect").addEventListener("click", wakeReconnect);
    // Back (or forward) to this page from the browser's page cache: it comes back as it was,
    // the conversation included, without asking the server, whose session may have ended
    // meanwhile (a logout in another tab). Nothing shows until the server says who is there.
    // A logout in another tab of this browser: this one stops showing the chat at once,
    // rather than at its next request (the server says whether this tab's session ended).
    window.addEventListener("storage", (event) => {
      if (event.key !== "goagent.logout" || $("app").hidden) return;
      api("/api/me").then((me) => { if (!me.authenticated) signedOut(me.error); }).catch(() => {});
    });
    window.addEventListener("pageshow", (event) => {
      if (!event.persisted) return;
      $("app").hidden = true;
      $("messages").replaceChildren();
      $("threads").replaceChildren();
      state.thread = null;
      start().catch((e) => status(e.message, true));
    });
    window.addEventListener("online", wakeReconnect);
    document.addEventListener("visibilitychange", () => {
      if (document.hidden) {
        hidden();
        return;
      }
      dropSlot();  // a shown tab follows without the slot: a hidden one may take it
      wakeReconnect();
      const thread = state.thread;
      if (thread && !state.running && !state.following && !conn.lost && !$("app").hidden) {
        api(`/api/threads/${thread}`).then((t) => { if (t.running) follow(thread); }).catch(() => {});
      }
    });
    $("stop").addEventListener("click", () => {
      api(`/api/threads/${state.thread}/stop`, { method: "POST", body: {} }).catch(() => {});
    });
    $("rename").addEventListener("click", async () => {
      if (!state.thread) return;
      const title = prompt("New title", state.title || "");
      if (!title) return;
      await api(`/api/threads/${state.thread}`, { method: "PATCH", body: { title } });
      showTitle(title);
      await loadThreads();
    });
    $("delete").addEventListener("click", async () => {
      if (!state.thread || state.running || !confirm("Delete this thread?")) return;
      await api(`/api/threads/${state.thread}`, { method: "DELETE" });
      state.thread = null;
      $("messages").replaceChildren();
      showTitle("goagent-py");
      await loadThreads();
    });
    $("logout").addEventListener("click", async () => {
      try {
        await api("/api/logout", { method: "POST", body: {} });
        localStorage.setItem("goagent.logout", String(Date.now()));  // the other tabs hear it
        signedOut("");
      } catch (error) { status(error.message, true); }
    });
    $("login-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      const user = $("login-user").value.trim();
      const secret = $("login-secret").value;
      const body = user ? { user, password: secret } : { token: secret };
      try { await api("/api/login", { method: "POST", body }); await start(); }
      catch (error) { $("login-error").textContent = plain(error.message); }
    });
    start().catch((e) => status(e.message, true));
  });
})();
