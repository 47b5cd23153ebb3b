// The run page: its markup, then what fills it.
"use strict";

document.getElementById("page").innerHTML = `
<h2><span class="mono" id="run-id"></span> <span id="workflow"></span>
<span class="status" id="status"></span></h2>
<p class="muted" id="times"></p>
<p><button class="danger" id="cancel">Cancel</button>
<button class="danger" id="terminate" title="stop now, without compensations">Terminate</button>
<span id="said"></span></p>
<div class="error" id="message"></div>
<div id="hooks"></div>
<h3>Timeline</h3>
<table class="gantt" id="timeline">
<thead><tr><th>At</th><th>What</th><th>Status</th><th>Detail</th><th class="track"></th></tr></thead>
<tbody></tbody>
</table>
<h3>Input and result</h3>
<table><tr><th>Input</th><td class="mono" id="input"></td></tr>
<tr><th>Result</th><td class="mono" id="output"></td></tr>
<tr><th>Error</th><td class="mono error" id="error"></td></tr></table>
<h3>As <code>wayline runs show</code> tells it</h3>
<pre class="story" id="story"></pre>
`;

const runId = decodeURIComponent(location.pathname.split("/").pop());
let shownHooks = "";

function entries(run) {
  const out = [];
  for (const s of run.steps) {
    const last = s.attempts[s.attempts.length - 1];
    const errors = s.attempts.filter((a) => a.error).map(
      (a) => `attempt ${a.attempt}: ${a.error.message || a.error.type || JSON.stringify(a.error)}` +
             (a.retryAt && a.endedAt ? ` (retried ${wl.duration(a.retryAt - a.endedAt)} later)` : ""));
    const detail = `${s.attempts.length} attempt${s.attempts.length === 1 ? "" : "s"}` +
      (s.status === "completed" ? `; result ${JSON.stringify(s.result)}` : "") +
      (errors.length ? "\n" + errors.join("\n") : "");
    out.push({ kind: "step", key: s.name, label: `step ${s.name}` + (s.compensates ? ` (reverses ${s.compensates})` : ""),
               status: s.status, start: s.createdAt, end: s.endedAt || (last && last.endedAt), detail });
  }
  for (const h of run.hooks) {
    out.push({ kind: "hook", key: h.id, label: `hook ${h.token}`, status: h.status, start: h.createdAt,
               end: h.receivedAt, detail: (h.type ? `type ${h.type}` : "") +
               (h.receivedAt ? ` received ${JSON.stringify(h.payload)}` : "") });
  }
  for (const w of run.waits) {
    out.push({ kind: "sleep", key: w.id, label: `sleep ${w.id}`, status: w.early ? "woken early" : w.status,
               start: w.createdAt, end: w.completedAt, detail: `until ${wl.time(w.resumeAt)}` });
  }
  for (const c of run.children) {
    out.push({ kind: "child", key: c.id, label: `child ${c.workflow}`, status: c.status, start: c.createdAt,
               end: c.endedAt, detail: c.runId, link: "/runs/" + encodeURIComponent(c.runId) });
  }
  return out.sort((a, b) => a.start - b.start);
}

function timeline(run) {
  const origin = run.createdAt;
  const finish = run.endedAt || Date.now() / 1000;
  const span = Math.max(finish - origin, 0.001);
  const body = document.querySelector("#timeline tbody");
  body.replaceChildren();
  for (const e of entries(run)) {
    const tr = document.createElement("tr");
    tr.dataset.kind = e.kind;
    tr.dataset.key = e.key;
    const what = document.createElement("td");
    if (e.link) { const a = wl.text("a", e.label); a.href = e.link; what.append(a); }
    else what.textContent = e.label;
    const track = document.createElement("td");
    track.className = "track";
    const bar = wl.text("div", null, "bar " + e.status);
    const left = ((e.start - origin) / span) * 100;
    const width = (((e.end || finish) - e.start) / span) * 100;
    bar.style.marginLeft = Math.min(left, 100) + "%";
    bar.style.width = Math.max(Math.min(width, 100 - left), 0.5) + "%";
    track.append(bar);
    const detail = wl.text("td", e.detail, "mono");
    detail.style.whiteSpace = "pre-wrap";
    tr.append(wl.text("td", "+" + wl.duration(e.start - origin)), what,
              wl.text("td", e.status, "status " + e.status), detail, track);
    body.append(tr);
  }
}

function hooks(run) {
  const waiting = run.hooks.filter((h) => h.status === "waiting");
  const key = waiting.map((h) => h.token).join(" ");
  if (key === shownHooks) return; // keep what a person is typing
  shownHooks = key;
  const box = document.getElementById("hooks");
  box.replaceChildren();
  if (!waiting.length || run.endedAt) return;
  box.append(wl.text("h3", "Waiting for"));
  for (const h of waiting) {
    box.append(wl.text("p", `hook ${h.token}` + (h.type ? ` (${h.type})` : ""), "mono"));
    box.append(wl.hookForm(h));
  }
}

async function load() {
  try {
    const run = await wl.api("/api/runs/" + encodeURIComponent(runId));
    document.title = `${run.workflow} ${run.runId} · Wayline`;
    document.getElementById("run-id").textContent = run.runId;
    document.getElementById("workflow").textContent = run.workflow;
    const status = document.getElementById("status");
    status.textContent = run.status;
    status.className = "status " + run.status;
    document.getElementById("times").textContent = `created ${wl.time(run.createdAt)}` +
      (run.endedAt ? `, ended ${wl.time(run.endedAt)} (took ${wl.duration(run.endedAt - run.createdAt)})` : "") +
      (run.waitingForWorker ? ` — ${run.waitingForWorker}` : "");
    for (const id of ["cancel", "terminate"]) document.getElementById(id).disabled = wl.readOnly || !!run.endedAt;
    document.getElementById("input").textContent = JSON.stringify(run.input);
    document.getElementById("output").textContent = run.status === "completed" ? JSON.stringify(run.output) : "";
    document.getElementById("error").textContent = run.error ? JSON.stringify(run.error) : "";
    document.getElementById("story").textContent = run.story;
    timeline(run);
    hooks(run);
    document.getElementById("message").textContent = "";
  } catch (err) {
    document.getElementById("message").textContent = err.message;
  }
}

async function act(verb) {
  const said = document.getElementById("said");
  try {
    const done = await wl.api(`/api/runs/${encodeURIComponent(runId)}/${verb}`, { method: "POST", body: "{}" });
    said.className = "ok";
    said.textContent = done.cancelled || done.terminated ? `${verb} asked` : "the run had already ended";
  } catch (err) {
    said.className = "error";
    said.textContent = err.message;
  }
}

document.getElementById("cancel").addEventListener("click", () => act("cancel"));
document.getElementById("terminate").addEventListener("click", () => act("terminate"));
wl.header().then(() => wl.live("?run=" + encodeURIComponent(runId), load));
