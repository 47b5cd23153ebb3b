// The schedules page: the schedules of `wayline schedules`, their next ticks and last runs.
"use strict";

document.getElementById("page").innerHTML = `
<h2>Schedules</h2>
<p class="muted mono" id="file"></p>
<table id="schedules">
<thead><tr><th>Name</th><th>Schedule</th><th>Time zone</th><th>Workflow</th><th>Policy</th><th>Next tick</th><th>Last run</th><th>Note</th><th></th></tr></thead>
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
    const note = s.invalid ? `not scheduled: ${s.invalid}` : s.suspended ? "suspended" : "";
    tr.append(wl.text("td", s.name), wl.text("td", s.cron, "mono"), wl.text("td", s.timeZone),
              wl.text("td", s.workflow), wl.text("td", s.concurrencyPolicy), wl.text("td", s.next, "mono"),
              last, wl.text("td", note, s.invalid ? "error" : "muted"), suspendCell(s));
    body.append(tr);
  }
  document.getElementById("none").hidden = schedules.length > 0;
}

// Suspend or resume: an action, so it needs the console's token.
function suspendCell(s) {
  const cell = document.createElement("td");
  const action = s.suspended ? "resume" : "suspend";
  const button = wl.text("button", s.suspended ? "Resume" : "Suspend", action);
  button.disabled = wl.readOnly;
  button.addEventListener("click", async () => {
    try {
      await wl.api(`/api/schedules/${encodeURIComponent(s.name)}/${action}`, { method: "POST" });
      await draw();
    } catch (err) {
      document.getElementById("message").textContent = err.message;
    }
  });
  cell.append(button);
  return cell;
}

// A tick starts a run, which the change feed hears; an edit of the file alone it does not.
wl.start("", draw, 5000);
