// The hooks page: its markup, then what fills it.
"use strict";

document.getElementById("page").innerHTML = `
<h2>Hooks waiting</h2>
<table id="hooks">
<thead><tr><th>Token</th><th>Run</th><th>Workflow</th><th>Type</th><th>Metadata</th><th>Waiting since</th><th>Resume with</th></tr></thead>
<tbody></tbody>
</table>
<p class="muted" id="none" hidden>No hook is waiting.</p>
<div class="error" id="message"></div>
`;

async function load() {
  try {
    const { hooks } = await wl.api("/api/hooks");
    const body = document.querySelector("#hooks tbody");
    const shown = new Set();
    for (const tr of body.querySelectorAll("tr")) {
      // a form someone is typing in stays; an answered hook's row goes
      if (!hooks.some((h) => h.token === tr.dataset.token && h.status === "waiting")) tr.remove();
      else shown.add(tr.dataset.token);
    }
    for (const hook of hooks.filter((h) => h.status === "waiting" && !shown.has(h.token))) {
      const tr = document.createElement("tr");
      tr.dataset.token = hook.token;
      const formCell = document.createElement("td");
      formCell.append(wl.hookForm(hook));
      tr.append(wl.text("td", hook.token, "mono"), wl.runCell(hook.runId), wl.text("td", hook.workflow),
                wl.text("td", hook.type || "any JSON", "mono"),
                wl.text("td", hook.metadata === null ? "" : JSON.stringify(hook.metadata), "mono"),
                wl.text("td", wl.time(hook.createdAt)), formCell);
      body.append(tr);
    }
    document.getElementById("none").hidden = body.children.length > 0;
  } catch (err) {
    document.getElementById("message").textContent = err.message;
  }
}
wl.header().then(() => wl.live("", load));
