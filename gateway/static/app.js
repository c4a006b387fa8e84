// Nexo web page: the live event stream of a run and the decision buttons. Plain
// JavaScript, no build step. Everything a run produced is put into the page with
// textContent, never innerHTML, so it is shown as text.
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

  // Approve / Deny.
  document.querySelectorAll("form.decide").forEach(function (form) {
    form.addEventListener("submit", async function (ev) {
      ev.preventDefault();
      const msg = form.querySelector(".msg");
      const approved = !(ev.submitter && ev.submitter.value === "deny");
      const reason = form.reason.value.trim();
      if (!approved && reason === "") {
        say(msg, "A denial needs a reason.", true);
        form.reason.focus();
        return;
      }
      const buttons = form.querySelectorAll("button");
      buttons.forEach(function (b) { b.disabled = true; });
      say(msg, approved ? "Approving…" : "Denying…", false);
      try {
        const res = await post(form.action, {
          approved: approved,
          reason: reason,
          always: !!(form.always && form.always.checked),
        });
        say(msg, res.message + " — the run continues; this page follows it.", false);
        form.classList.add("sent");
      } catch (e) {
        say(msg, e.message, true);
        buttons.forEach(function (b) { b.disabled = false; });
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

  // The live event stream of the run page.
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

  const url = "/v1/runs/" + encodeURIComponent(run.dataset.id) + "/events?after=" + encodeURIComponent(run.dataset.lastSeq);
  const es = new EventSource(url);
  es.onopen = function () { live.textContent = "● live"; live.className = "live"; };
  es.onmessage = function (e) { addEvent(JSON.parse(e.data)); };
  es.addEventListener("status", function (e) { onStatus(JSON.parse(e.data)); });
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
})();
