// The runs page: its markup, then what fills it.
"use strict";

document.getElementById("page").innerHTML = `
<div class="counts" id="counts"></div>
<table id="runs">
<thead><tr><th>Run</th><th>Id</th><th>Workflow</th><th>Status</th><th>Created</th><th>Duration</th></tr></thead>
<tbody></tbody>
</table>
<p><button id="more" hidden>Older runs</button></p>
<div class="error" id="message"></div>
`;

const params = new URLSearchParams(location.search);
let status = params.get("status") || "";
let cursor = null;

function row(run) {
  const tr = document.createElement("tr");
  tr.dataset.runId = run.runId;
  const end = run.endedAt || Date.now() / 1000;
  tr.append(wl.runCell(run.runId), wl.text("td", run.businessId || ""), wl.text("td", run.workflow),
            wl.text("td", run.status, "status " + run.status), wl.text("td", wl.time(run.createdAt)),
            wl.text("td", wl.duration(end - run.createdAt) + (run.endedAt ? "" : " so far")));
  return tr;
}

let recount = null;
let partial = false;
let retry = 1000;
let asked = 0;

// partial: the server is still loading its runs, so the counts are of the runs read so far
// and show as "at least" (a "+").
function counts(byStatus, partial) {
  const box = document.getElementById("counts");
  box.replaceChildren();
  const total = Object.values(byStatus).reduce((a, b) => a + b, 0);
  const more = partial ? "+" : "";
  for (const [name, n] of [["", total], ...Object.entries(byStatus).sort()]) {
    const b = wl.text("button", `${name || "all"} ${n}${more}`, name === status ? "on" : "");
    b.dataset.status = name;
    b.addEventListener("click", () => {
      status = name;
      history.replaceState(null, "", name ? "?status=" + name : "/");
      load();
    });
    box.append(b);
  }
}

async function load(more = false) {
  const q = new URLSearchParams({ limit: "50" });
  if (status) q.set("status", status);
  if (more && cursor) q.set("cursor", cursor);
  // only the answer to the latest read is shown: an earlier one that lands later (a first
  // page read again for its counts while the user asked for older runs) would replace the
  // rows shown since
  const mine = ++asked;
  try {
    const page = await wl.api("/api/runs?" + q);
    if (mine !== asked) return;
    const body = document.querySelector("#runs tbody");
    if (!more) body.replaceChildren();
    for (const run of page.runs) body.append(row(run));
    cursor = page.nextCursor;
    document.getElementById("more").hidden = !cursor;
    counts(page.counts, page.countsPartial);
    partial = page.countsPartial;
    retry = 1000;
    // the first page is read again each second until the counts are exact (a page the user
    // moved on to with "Older runs" is left as it is)
    clearTimeout(recount);
    if (partial && !more) recount = setTimeout(() => load(), 1000);
    document.getElementById("message").textContent = "";
  } catch (err) {
    if (mine !== asked) return;
    document.getElementById("message").textContent = err.message;
    // counts shown as partial are read again after a failed read too, or their "+" would
    // stay for good; each failure in a row doubles the wait (up to 30 s), so a server that
    // fails is not asked every second
    clearTimeout(recount);
    if (partial && !more) {
      recount = setTimeout(() => load(), retry);
      retry = Math.min(retry * 2, 30000);
    }
  }
}

document.getElementById("more").addEventListener("click", () => load(true));
wl.header().then(() => wl.live("", () => load()));
