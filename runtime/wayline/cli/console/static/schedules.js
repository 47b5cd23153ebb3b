// The schedules page: the schedules of `wayline schedules`, their next ticks and last runs.
"use strict";

document.getElementById("page").innerHTML = `
<h2>Schedules</h2>
<p class="muted mono" id="file"></p>
<table id="schedules">
<thead><tr><th>Name</th><th>Schedule</th><th>Time zone</th><th>Workflow</th><th>Policy</th><th>Next tick</th><th>Last run</th><th>Note</th></tr></thead>
<tbody></tbody>
</table>
<p class="muted" id="none" hidden>No schedules (wayline schedules add).</p>
<div class="error" id="message"></div>
`;

async function draw() {
  const { file, schedules } = await wl.api("/api/schedules");
  document.getElementById("file").textContent = file ? `from ${file}` : "no schedules file";
  const body = document.querySelector("#schedules tbody");
  body.replaceChildren();
  for (const s of schedules) {
    const tr = document.createElement("tr");
    tr.dataset.name = s.name;
    const last = s.lastRunId ? wl.runCell(s.lastRunId) : wl.text("td", s.lastTick ? wl.time(s.lastTick) : "");
    if (s.lastRunStatus) last.append(" ", wl.text("span", s.lastRunStatus, "status " + s.lastRunStatus));
    tr.append(wl.text("td", s.name), wl.text("td", s.cron, "mono"), wl.text("td", s.timeZone),
              wl.text("td", s.workflow), wl.text("td", s.concurrencyPolicy), wl.text("td", s.next, "mono"),
              last, wl.text("td", s.invalid ? `not scheduled: ${s.invalid}` : "", "error"));
    body.append(tr);
  }
  document.getElementById("none").hidden = schedules.length > 0;
}

// A tick starts a run, which the change feed hears; an edit of the file alone it does not.
wl.start("", draw, 5000);
