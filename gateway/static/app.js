// Nexo web page: the live event stream of a run, the decision buttons, and a session's
// prompt box and live activity stream. Plain JavaScript, no build step. Everything a run,
// a model or a tool produced is put into the page with textContent, never innerHTML, so
// it is shown as text.
"use strict";

(function () {
  const csrf = (document.querySelector('meta[name="nexo-csrf"]') || {}).content || "";
  const closedStatuses = ["done", "failed", "interrupted", "canceled"];

  // post sends a JSON request the way the gateway wants it from a page: same origin,
  // the session cookie, and the session's CSRF token in a header.
  async function post(url, body) {
    const res = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Nexo-CSRF": csrf },
      body: JSON.stringify(body || {}),
    });
    let data = null;
    try { data = await res.json(); } catch (e) { /* no body */ }
    if (!res.ok) {
      throw new Error((data && data.detail) || res.status + " " + res.statusText);
    }
    return data;
  }

  function say(el, text, isError) {
    if (!el) return;
    el.textContent = text;
    el.classList.toggle("problem", !!isError);
  }

  // Approve / Deny / Approve edited / Answer, and Raise for a budget pause. Every decision carries the sha256 of the
  // arguments this page shows, so the run refuses it if they are not the pending call's.
  document.querySelectorAll("form.decide").forEach(function (form) {
    form.addEventListener("submit", async function (ev) {
      ev.preventDefault();
      const msg = form.querySelector(".msg");
      const choice = (ev.submitter && ev.submitter.value) || "approve";
      const reason = form.reason.value.trim();
      const body = { reason: reason };
      if (form.dataset.argsSha256) body.args_sha256 = form.dataset.argsSha256;
      let doing = "Approving…";
      switch (choice) {
        case "deny":
          if (reason === "") {
            say(msg, "A denial needs a reason.", true);
            form.reason.focus();
            return;
          }
          body.action = "deny";
          doing = "Denying…";
          break;
        case "edit": {
          let args;
          try { args = JSON.parse(form.args.value); } catch (e) { args = null; }
          if (!args || typeof args !== "object" || Array.isArray(args)) {
            say(msg, "The edited arguments must be a JSON object.", true);
            form.args.focus();
            return;
          }
          body.action = "approve";
          body.args = args;
          doing = "Approving the edited call…";
          break;
        }
        case "raise": {
          // A budget pause: add to the bound it reached (its input is there only then),
          // as approve --budget does; the run refuses a raise of the wrong kind.
          const budget = {};
          if (form.raise_tokens) {
            const n = Number(form.raise_tokens.value.trim());
            if (!Number.isInteger(n) || n <= 0) {
              say(msg, "The token raise must be a whole number above 0, e.g. 50000.", true);
              form.raise_tokens.focus();
              return;
            }
            budget.tokens = n;
          }
          if (form.raise_cost) {
            const x = Number(form.raise_cost.value.trim());
            if (!Number.isFinite(x) || x <= 0) {
              say(msg, "The cost raise must be an amount of USD above 0, e.g. 2.50.", true);
              form.raise_cost.focus();
              return;
            }
            budget.cost = x;
          }
          body.action = "approve";
          body.budget = budget;
          doing = "Raising the budget…";
          break;
        }
        case "answer":
          if (form.result.value.trim() === "") {
            say(msg, "An answer needs a text: the model gets it instead of the tool's result.", true);
            form.result.focus();
            return;
          }
          body.action = "answer";
          body.result = form.result.value;
          doing = "Answering…";
          break;
        default:
          body.action = "approve";
          body.always = !!(form.always && form.always.checked);
      }
      const buttons = form.querySelectorAll("button");
      buttons.forEach(function (b) { b.disabled = true; });
      say(msg, doing, false);
      try {
        const res = await post(form.action, body);
        say(msg, res.message + " — the run continues; this page follows it.", false);
        form.classList.add("sent");
        buttons.forEach(function (b) { b.disabled = false; });
        form.dispatchEvent(new CustomEvent("decided", { bubbles: true }));
      } catch (e) {
        say(msg, e.message, true);
        buttons.forEach(function (b) { b.disabled = false; });
      }
    });
  });

  // Fork from here: a new run of the agent from the thread before the call and the
  // workspace the call found (POST /v1/runs/{id}/fork, as `starter fork --at`), then its
  // page. An error (an unknown call, an agent no worker offers) stays on this page.
  document.querySelectorAll("form.fork").forEach(function (form) {
    form.addEventListener("submit", async function (ev) {
      ev.preventDefault();
      const msg = form.querySelector(".msg");
      const button = form.querySelector("button");
      const body = { at: form.dataset.at };
      const prompt = form.prompt.value.trim();
      if (prompt !== "") body.prompt = prompt;
      button.disabled = true;
      say(msg, "Forking…", false);
      try {
        const res = await post(form.action, body);
        window.location.href = "/runs/" + encodeURIComponent(res.id);
      } catch (e) {
        say(msg, "Fork failed: " + e.message, true);
        button.disabled = false;
      }
    });
  });

  // Cancel / Re-run.
  document.querySelectorAll("button.action").forEach(function (btn) {
    btn.addEventListener("click", async function () {
      if (btn.dataset.confirm && !window.confirm(btn.dataset.confirm)) return;
      const msg = document.getElementById("action-msg");
      btn.disabled = true;
      try {
        const res = await post(btn.dataset.action, {});
        if (res && res.rerun_of) {
          window.location.href = "/runs/" + encodeURIComponent(res.id);
          return;
        }
        say(msg, res.message, false);
      } catch (e) {
        say(msg, e.message, true);
        btn.disabled = false;
      }
    });
  });

  runPage();
  sessionPage();
  approvalsPage();

  // The Approvals view: a decided row goes at once; every few seconds the inbox is asked
  // again (GET /v1/approvals), rows no longer pending go, and new ones reload the page
  // unless a reason is being typed (then a note says so).
  function approvalsPage() {
    const table = document.getElementById("approvals");
    if (!table) return;
    const live = document.getElementById("approvals-live");
    const empty = document.getElementById("approvals-empty");
    function rows() { return Array.from(table.querySelectorAll("tr.pending-call")); }
    function refreshEmpty() { empty.hidden = rows().length > 0; }
    table.addEventListener("decided", function (ev) {
      const tr = ev.target.closest("tr.pending-call");
      if (tr) tr.remove();
      refreshEmpty();
    });
    const agent = live.dataset.agent;
    const url = "/v1/approvals" + (agent ? "?agent=" + encodeURIComponent(agent) : "");
    async function poll() {
      try {
        const res = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
        if (!res.ok) throw new Error(res.status + " " + res.statusText);
        const data = await res.json();
        const now = new Set(data.approvals.map(function (p) { return p.run + " " + p.call_id; }));
        const shown = new Set();
        rows().forEach(function (tr) {
          shown.add(tr.dataset.key);
          if (!now.has(tr.dataset.key)) tr.remove();
        });
        refreshEmpty();
        const added = Array.from(now).filter(function (k) { return !shown.has(k); }).length;
        if (added > 0) {
          const typing = rows().some(function (tr) {
            return Array.from(tr.querySelectorAll("input[name=reason], input[name^=raise_]")).some(function (r) {
              return r.value.trim() !== "";
            });
          });
          if (!typing) { window.location.reload(); return; }
          live.textContent = added + " more call(s) waiting: reload to see them";
        } else {
          live.textContent = "● live";
          live.className = "live";
        }
      } catch (e) {
        live.textContent = "not updating: " + e.message;
        live.className = "problem";
      }
      window.setTimeout(poll, 2000);
    }
    window.setTimeout(poll, 2000);
  }

  // The live event stream of the run page.
  function runPage() {
    const run = document.getElementById("run");
    if (!run || closedStatuses.includes(run.dataset.status)) return;
    const rendered = run.dataset.status;
    const tbody = document.getElementById("events");
    const live = document.getElementById("live");
    const badge = document.getElementById("status");

    function cell(tr, text, cls) {
      const td = document.createElement("td");
      if (cls === "code") {
        const code = document.createElement("code");
        code.textContent = text;
        td.appendChild(code);
      } else {
        td.textContent = text;
        if (cls) td.className = cls;
      }
      tr.appendChild(td);
    }

    function clock(iso) {
      const d = new Date(iso);
      return isNaN(d) ? iso : d.toISOString().slice(11, 23);
    }

    function addEvent(ev) {
      const tr = document.createElement("tr");
      tr.className = "new";
      cell(tr, String(ev.seq));
      cell(tr, clock(ev.at), "mono");
      cell(tr, ev.type, "type");
      cell(tr, ev.data === null || ev.data === undefined ? "" : JSON.stringify(ev.data), "code");
      tbody.appendChild(tr);
    }

    // A status that changes what the page offers (a new pending decision, or the end)
    // re-renders the page from the server; "running" only updates the badge.
    function onStatus(st) {
      if (st.status === rendered) return;
      if (st.status === "suspended" || closedStatuses.includes(st.status)) {
        es.close();
        window.location.reload();
        return;
      }
      badge.textContent = st.status;
      badge.className = "badge s-" + st.status;
      const pending = document.getElementById("pending");
      if (pending) pending.classList.add("decided");
    }

    // What the run's retried activities wait on, as `starter show` says it (a retry writes
    // nothing to the events): "model call retrying (attempt 5, next in 16 s): ...".
    const retryList = document.getElementById("retrying");
    function waitText(ms) {
      const s = Math.ceil(ms / 1000);
      if (s < 60) return s + " s";
      if (s < 3600) return Math.floor(s / 60) + " min" + (s % 60 ? " " + (s % 60) + " s" : "");
      return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
    }
    function retryLine(p) {
      let when = "due now";
      const next = p.next_attempt_at ? new Date(p.next_attempt_at) - new Date() : 0;
      if (p.running) when = "running";
      else if (next > 0) when = "next in " + waitText(next);
      return p.name + " retrying (attempt " + p.attempt + ", " + when + ")" + (p.last_failure ? ": " + p.last_failure : "");
    }
    function onRetrying(r) {
      if (!retryList) return;
      retryList.replaceChildren();
      (r.retrying || []).forEach(function (p) {
        const li = document.createElement("li");
        li.textContent = retryLine(p);
        retryList.appendChild(li);
      });
      retryList.hidden = retryList.children.length === 0;
    }

    const url = "/v1/runs/" + encodeURIComponent(run.dataset.id) + "/events?after=" + encodeURIComponent(run.dataset.lastSeq);
    const es = new EventSource(url);
    es.onopen = function () { live.textContent = "● live"; live.className = "live"; };
    es.onmessage = function (e) { addEvent(JSON.parse(e.data)); };
    es.addEventListener("status", function (e) { onStatus(JSON.parse(e.data)); });
    es.addEventListener("retrying", function (e) { onRetrying(JSON.parse(e.data)); });
    es.addEventListener("end", function (e) { es.close(); onStatus(JSON.parse(e.data)); });
    es.addEventListener("problem", function (e) {
      es.close();
      live.textContent = "stream failed: " + JSON.parse(e.data).detail;
      live.className = "problem";
    });
    es.onerror = function () {
      if (es.readyState === EventSource.CLOSED) { live.textContent = "stream closed"; live.className = "muted"; }
      else { live.textContent = "reconnecting…"; live.className = "muted"; }
    };
  }

  // The session page: the prompt box, and the live activity stream drawn into the turns:
  // user_input opens a turn, text (live, then the call's text event) and thinking chunks
  // are appended to it as they arrive, a steered message is drawn where a model call took
  // it, a tool call's start and update are merged by id, turn_end closes the turn (marked
  // when an interrupt ended it).
  function sessionPage() {
    const root = document.getElementById("session");
    if (!root) return;
    const agent = root.dataset.agent;
    const base = "/v1/sessions/" + encodeURIComponent(agent) + "/" + encodeURIComponent(root.dataset.instance);
    const turns = document.getElementById("turns");
    const live = document.getElementById("live");
    const badge = document.getElementById("status");
    let last = Number(root.dataset.after) || 0; // seq of the last event drawn
    let current = null; // the turn being written
    let es = null;
    let prompting = false;
    // fresh: the page was rendered before the session existed. Its stream is tried until
    // the session's first prompt (from this page or anywhere else) creates it; wait is the
    // pause between tries.
    let fresh = root.dataset.status === "new";
    let wait = 1000;

    function el(tag, cls, text) {
      const e = document.createElement(tag);
      if (cls) e.className = cls;
      if (text !== undefined) e.textContent = text;
      return e;
    }

    function findTurn(n) {
      for (const li of turns.children) {
        if (li.dataset.turn === String(n)) return li;
      }
      return null;
    }

    function said(cls, who, text) {
      const div = el("div", "said " + cls);
      const blocks = el("div", "blocks");
      if (text !== undefined) blocks.appendChild(el("div", "text", text));
      div.append(el("span", "who", who), blocks);
      return div;
    }

    function openTurn(n, prompt) {
      let li = findTurn(n);
      if (li && li.dataset.fallback) {
        // Drawn from the prompt's answer while the stream was down: draw it again, live.
        delete li.dataset.fallback;
        blocksOf(li).replaceChildren();
        li.className = "turn writing";
      }
      if (li) return li;
      li = el("li", "turn writing");
      li.dataset.turn = String(n);
      li.append(said("you", "you", prompt), said("agent", agent), el("p", "meta", "turn " + n + " · writing…"));
      turns.appendChild(li);
      const none = document.getElementById("no-turns");
      if (none) none.hidden = true;
      return li;
    }

    function blocksOf(li) { return li.querySelector(".said.agent .blocks"); }

    // textBlock returns the turn's last block when it continues the same model call's
    // text (or thinking), else a new block.
    function textBlock(li, kind, call) {
      const blocks = blocksOf(li);
      let b = blocks.lastElementChild;
      if (!b || b.dataset.kind !== kind || b.dataset.call !== String(call || "")) {
        b = el("div", kind === "thinking" ? "text thinking" : "text");
        b.dataset.kind = kind;
        b.dataset.call = String(call || "");
        blocks.appendChild(b);
      }
      return b;
    }

    // appendText adds a chunk to the turn's text (textBlock).
    function appendText(li, kind, content, call) {
      textBlock(li, kind, call).textContent += content;
    }

    // Live text of the model call in flight ("live" messages, read from the call's
    // heartbeat: not part of the stream) is drawn into the call's block as the model
    // writes it; from is the byte offset of text in the reply. The call's text event then
    // sets the block to the whole text, so nothing shows twice and nothing is lost. Live
    // thinking ("live_thinking" messages, the same shape) goes the same way into the
    // call's thinking block, which its thinking event then sets.
    const utf8 = new TextEncoder();
    const fromUTF8 = new TextDecoder();
    // kind → call → {el, start, end, text}: what its block shows, in bytes from start to end
    let liveShown = { text: {}, thinking: {} };

    function onLive(kind, d) {
      if (!current || !d.call) return;
      const shown = liveShown[kind];
      let s = shown[d.call];
      if (s && d.from === s.end) {
        s.text += d.text;
      } else if (s && d.from >= s.start && d.from < s.end) {
        // A retried attempt wrote differently: its text replaces the block's from there.
        s.text = fromUTF8.decode(utf8.encode(s.text).slice(0, d.from - s.start)) + d.text;
      } else {
        // The first text, or text after a part this page never saw.
        s = s || { el: textBlock(current, kind, d.call) };
        s.start = d.from;
        s.text = d.text;
        shown[d.call] = s;
      }
      s.end = d.from + utf8.encode(d.text).length;
      s.el.textContent = (s.start > 0 ? "…" : "") + s.text;
    }

    // recorded draws a call's text or thinking event: into the block its live messages
    // drew (replacing what they showed), else appended as a chunk.
    function recorded(kind, d) {
      const shown = liveShown[kind];
      if (d.call && shown[d.call]) {
        shown[d.call].el.textContent = d.content || "";
        delete shown[d.call];
        return;
      }
      appendText(current, kind, d.content || "", d.call);
    }

    function toolCall(li, d) {
      const blocks = blocksOf(li);
      let b = null;
      for (const c of blocks.children) {
        if (c.dataset.callId === String(d.id)) b = c;
      }
      if (!b) {
        b = el("details", "tool");
        b.dataset.callId = String(d.id);
        const summary = el("summary");
        summary.append(el("span", "muted", "tool "), el("code", "tool-name"), el("span", "tool-status"));
        b.append(summary, el("pre", "tool-args"), el("pre", "tool-result"));
        blocks.appendChild(b);
      }
      if (d.name) b.querySelector(".tool-name").textContent = d.name;
      if (d.status) {
        b.querySelector(".tool-status").textContent = " " + d.status;
        b.dataset.status = d.status;
      }
      if (d.args !== undefined && d.args !== null) b.querySelector(".tool-args").textContent = JSON.stringify(d.args, null, 2);
      if (d.content !== undefined && d.content !== null) b.querySelector(".tool-result").textContent = String(d.content);
    }

    function note(li, text) { blocksOf(li).appendChild(el("p", "note muted", text)); }

    // steered draws a message `session prompt --steer` (or the API's steer) handed to the
    // turn, where its next model call took it: among the agent's blocks, in order.
    function steered(li, d) {
      const b = el("div", "steer");
      b.append(el("span", "who", "you, while it ran"), el("div", "text", d.text || ""));
      blocksOf(li).appendChild(b);
    }

    function closeTurn(li, d) {
      li.classList.remove("writing");
      li.classList.add("done");
      if (d.interrupted) {
        // session interrupt ended it before its answer: no reply, and not a failure.
        li.classList.add("interrupted");
        blocksOf(li).appendChild(el("div", "text interrupted", "interrupted before its answer"));
      } else if (d.error) {
        li.classList.add("failed");
        blocksOf(li).appendChild(el("div", "text problem", d.error));
      }
      li.querySelector(".meta").textContent = "turn " + li.dataset.turn + (d.interrupted ? " · interrupted" : "");
    }

    function onEvent(ev) {
      if (ev.seq <= last) return;
      last = ev.seq;
      const d = ev.data || {};
      if (ev.type === "user_input") {
        current = openTurn(d.turn, d.text || "");
        return;
      }
      if (!current) return;
      switch (ev.type) {
        case "text":
        case "thinking":
          recorded(ev.type, d);
          break;
        case "tool_call":
          toolCall(current, d);
          break;
        case "plan": // update_plan: the whole plan, one line
          note(current, "plan: " + (d.steps || []).map((s) =>
            (s.status === "done" ? "[x] " : s.status === "in_progress" ? "[>] " : "[ ] ") + s.step).join(" · "));
          break;
        case "steer":
          steered(current, d);
          break;
        case "approval_requested":
          note(current, "waits for approval of " + d.tool + " (call " + d.call_id + ")");
          break;
        case "approval_decided":
          note(current, (d.action === "answer" ? "answered" : d.edited_args ? "approved with edited arguments" : d.approved ? "approved" : "denied") + " by " + d.by + (d.reason ? ": " + d.reason : ""));
          break;
        case "turn_end":
          closeTurn(current, d);
          current = null;
          liveShown = { text: {}, thinking: {} }; // a call that failed has no text event
          break;
      }
    }

    function setStatus(st) {
      root.dataset.status = st;
      badge.textContent = st;
      badge.className = "badge s-" + st;
    }

    // showPending shows the tool call the session waits for, with the decision form aimed
    // at it, or hides the box.
    function showPending(p) {
      const box = document.getElementById("pending");
      if (!box) return;
      const budgetBox = document.getElementById("budget-pending");
      if (p && p.kind === "tool_call" && p.capability === "budget") {
        // A budget pause: the page draws its figures and raise form itself, so a pause
        // this page does not have yet reloads it (once per pause, should the page still
        // not have it, it is shown as a decision like any other).
        if (budgetBox && budgetBox.dataset.call === p.call_id) {
          box.hidden = true;
          budgetBox.hidden = false;
          return;
        }
        if (sessionStorage.getItem("nexo-budget-reload") !== p.call_id) {
          sessionStorage.setItem("nexo-budget-reload", p.call_id);
          location.reload();
          return;
        }
      } else if (budgetBox) {
        budgetBox.hidden = true;
      }
      if (!p || p.kind !== "tool_call") {
        box.hidden = true;
        return;
      }
      document.getElementById("pending-call").textContent = p.call_id;
      document.getElementById("pending-tool").textContent = p.tool;
      document.getElementById("pending-json").textContent = p.args === undefined ? "" : JSON.stringify(p.args, null, 2);
      const form = box.querySelector("form.decide");
      if (form && form.dataset.callId !== p.call_id) {
        form.dataset.callId = p.call_id;
        form.action = form.dataset.base + encodeURIComponent(p.call_id);
        form.classList.remove("sent");
        form.reason.value = "";
        if (form.always) form.always.checked = false;
        if (form.args) form.args.value = p.args === undefined ? "{}" : JSON.stringify(p.args, null, 2);
        if (form.result) form.result.value = "";
        form.dataset.argsSha256 = p.args_sha256 || "";
        say(form.querySelector(".msg"), "", false);
      }
      box.hidden = false;
    }

    function startStream() {
      if (es) return;
      es = new EventSource(base + "/stream?after=" + encodeURIComponent(last));
      es.onopen = function () {
        live.textContent = "● live";
        live.className = "live";
        if (!fresh) return;
        fresh = false;
        if (!prompting) {
          // Another client's prompt created the session: the server draws it whole (its
          // turns, the close button), the stream then goes on from its last finished turn.
          es.close();
          es = null;
          location.reload();
          return;
        }
        const detail = document.getElementById("session-detail");
        if (detail) {
          detail.textContent = "Session created by this prompt · ";
          const a = el("a", "", "record");
          a.href = "/runs/" + encodeURIComponent(root.dataset.id);
          detail.appendChild(a);
        }
      };
      es.onmessage = function (e) { onEvent(JSON.parse(e.data)); };
      es.addEventListener("live", function (e) { onLive("text", JSON.parse(e.data)); });
      es.addEventListener("live_thinking", function (e) { onLive("thinking", JSON.parse(e.data)); });
      es.addEventListener("status", function (e) {
        const st = JSON.parse(e.data);
        setStatus(st.status);
        showPending(st.pending);
      });
      es.addEventListener("end", function (e) {
        es.close();
        es = null;
        const st = JSON.parse(e.data);
        setStatus(st.status);
        showPending(null);
        live.textContent = "session closed; a prompt reopens it";
        live.className = "muted";
      });
      es.addEventListener("problem", function (e) {
        es.close();
        es = null;
        live.textContent = "stream failed: " + JSON.parse(e.data).detail;
        live.className = "problem";
      });
      es.onerror = function () {
        if (es && es.readyState === EventSource.CLOSED) {
          // The session does not exist yet (404): a prompt in flight is creating it.
          es = null;
          live.textContent = fresh ? "waiting for the first prompt" : "not live";
          live.className = "muted";
          if (prompting) {
            setTimeout(startStream, 500);
          } else if (fresh) {
            setTimeout(startStream, wait);
            wait = Math.min(wait * 2, 5000);
          }
        } else {
          live.textContent = "reconnecting…";
          live.className = "muted";
        }
      };
    }

    const form = document.getElementById("prompt");
    if (form) {
      const msg = document.getElementById("prompt-msg");
      const send = document.getElementById("send");
      form.text.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
          ev.preventDefault();
          form.requestSubmit();
        }
      });
      form.addEventListener("submit", async function (ev) {
        ev.preventDefault();
        const text = form.text.value;
        if (text.trim() === "") {
          say(msg, "Write a prompt first.", true);
          form.text.focus();
          return;
        }
        send.disabled = true;
        prompting = true;
        say(msg, "Waiting for the reply…", false);
        // A new or closed session starts its run with this prompt: follow it from there.
        if (!es) setTimeout(startStream, 200);
        try {
          const res = await post(form.action, { text: text });
          form.text.value = "";
          say(msg, "", false);
          // Without a live stream the reply still shows.
          if (!findTurn(res.turn) && !(es && es.readyState === EventSource.OPEN)) {
            const li = openTurn(res.turn, text);
            appendText(li, "text", res.reply, "");
            closeTurn(li, {});
            li.dataset.fallback = "1";
          }
        } catch (e) {
          say(msg, e.message, true);
        }
        prompting = false;
        send.disabled = false;
        startStream();
      });
    }

    if (fresh || !closedStatuses.includes(root.dataset.status)) startStream();
  }
})();
