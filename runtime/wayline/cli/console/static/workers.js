// The workers page: what live workers serve, and the runs nobody serving them can drive.
"use strict";

document.getElementById("page").innerHTML = `
<h2>What workers serve</h2>
<table id="served">
<thead><tr><th>Workflow</th><th>Revision</th><th>Identity</th><th>Queue</th><th>Live workers</th><th>Last heard</th><th>Status</th><th>Ready</th><th>Oldest waits</th></tr></thead>
<tbody></tbody>
</table>
<h2>Queues</h2>
<table id="queues">
<thead><tr><th>Topic</th><th>Ready</th><th>Oldest waits</th></tr></thead>
<tbody></tbody>
</table>
<p class="muted" id="empty" hidden>No message is waiting.</p>
<h2>Runs waiting for a worker</h2>
<table id="waiting">
<thead><tr><th>Run</th><th>Workflow</th><th>Status</th><th>Why</th></tr></thead>
<tbody></tbody>
</table>
<p class="muted" id="none" hidden>Every live run has a live worker that can drive it.</p>
<div class="error" id="message"></div>
`;

async function draw() {
  const { now, served, queues, waiting } = await wl.api("/api/workers");
  const age = (at) => (at === null || at === undefined ? "" : wl.duration(Math.max(0, now - at)));
  const rows = document.querySelector("#served tbody");
  rows.replaceChildren();
  for (const entry of served.sort((a, b) => a.workflow.localeCompare(b.workflow))) {
    const tr = document.createElement("tr");
    tr.dataset.workflow = entry.workflow;
    const live = Object.entries(entry.workers || {}).filter(([, until]) => until >= now);
    tr.append(wl.text("td", entry.workflow), wl.text("td", entry.revision ?? ""),
              wl.text("td", String(entry.identity || "").slice(0, 12), "mono"),
              wl.text("td", entry.queue || ""),
              wl.text("td", live.map(([id]) => id).join(", "), "mono"),
              wl.text("td", wl.time(entry.seenAt)),
              wl.text("td", entry.live ? "live" : "gone", "status " + (entry.live ? "completed" : "cancelled")),
              wl.text("td", entry.ready ?? "?"), wl.text("td", age(entry.oldestReadyAt)));
    rows.append(tr);
  }
  const topics = document.querySelector("#queues tbody");
  topics.replaceChildren();
  for (const q of queues || []) {
    const tr = document.createElement("tr");
    tr.dataset.topic = q.topic;
    tr.append(wl.text("td", q.topic, "mono"), wl.text("td", q.ready), wl.text("td", age(q.oldestReadyAt)));
    topics.append(tr);
  }
  document.getElementById("empty").hidden = !queues || queues.length > 0;
  const body = document.querySelector("#waiting tbody");
  body.replaceChildren();
  for (const run of waiting) {
    const tr = document.createElement("tr");
    tr.dataset.runId = run.runId;
    tr.append(wl.runCell(run.runId), wl.text("td", run.workflow),
              wl.text("td", run.status, "status " + run.status), wl.text("td", run.why));
    body.append(tr);
  }
  document.getElementById("none").hidden = waiting.length > 0;
}

// A worker's heartbeat changes no run, so the change feed alone would not show it go away.
wl.start("", draw, 5000);
