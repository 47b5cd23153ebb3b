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
      // A form someone is typing in stays as it is. An answered hook's row stays too, its
      // form closed, so that whoever answered it still reads what the server said.
      shown.add(tr.dataset.token);
      if (!hooks.some((h) => h.token === tr.dataset.token && h.status === "waiting")) {
        tr.classList.add("answered");
        for (const control of tr.querySelectorAll("input, textarea, select, button")) control.disabled = true;
      }
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
    document.getElementById("none").hidden = body.querySelector("tr:not(.answered)") !== null;
  } catch (err) {
    document.getElementById("message").textContent = err.message;
  }
}
wl.header().then(() => wl.live("", load));
