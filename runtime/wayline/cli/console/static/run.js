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
<h3>Timeline <span class="muted" id="timeline-count"></span></h3>
<div class="timeline-box" id="timeline-box">
<table class="gantt" id="timeline">
<thead><tr><th>At</th><th>What</th><th>Status</th><th>Detail</th><th class="track"></th></tr></thead>
<tbody></tbody>
</table>
</div>
<h3>Input and result</h3>
<table><tr><th>Input</th><td class="mono" id="input"></td></tr>
<tr><th>Result</th><td class="mono" id="output"></td></tr>
<tr><th>Error</th><td class="mono error" id="error"></td></tr></table>
<h3>As <code>wayline runs show</code> tells it</h3>
<pre class="story" id="story"></pre>
`;

const runId = decodeURIComponent(location.pathname.split("/").pop());
let shownHooks = "";

// A long run's timeline is virtualised: only the rows in view, and MARGIN rows either side,
// are in the DOM, between two spacer rows that stand for the rest, so a run of thousands of
// steps draws as fast as one of a few dozen. A shorter one is drawn whole, lines wrapped.
const VIRTUAL_AFTER = 300;
const MARGIN = 30;
const STEPS_PER_PAGE = 1000; // the API's largest page of steps (docs/console.md)
const drawn = { run: null, rows: [], origin: 0, finish: 0, span: 1, rowHeight: 0, pending: false };

// A step the run called more than once (a step in a loop) is one group row, placed at its first
// call: `charge ×500: 498 completed, 1 failed, 1 running`. A click opens it: its occurrences,
// read from the API (`?group=`), follow it as rows of their own, virtualised as the rest are.
const groups = { open: new Set(), steps: new Map() };

function stepEntry(s, key, order) {
  const last = s.attempts[s.attempts.length - 1];
  const errors = s.attempts.filter((a) => a.error).map(
    (a) => `attempt ${a.attempt}: ${a.error.message || a.error.type || JSON.stringify(a.error)}` +
           (a.retryAt && a.endedAt ? ` (retried ${wl.duration(a.retryAt - a.endedAt)} later)` : ""));
  // a large result is sent as its first KiB and a link (resultPayload): the row shows the
  // start of the first and the link, which reads the whole value when it is clicked
  const large = s.resultPayload;
  const result = large ? large.preview.slice(0, 200) + "…" : JSON.stringify(s.result);
  const detail = `${s.attempts.length} attempt${s.attempts.length === 1 ? "" : "s"}` +
    (s.status === "completed" ? `; result ${result}` : "") +
    (errors.length ? "\n" + errors.join("\n") : "");
  return { kind: "step", key, label: `step ${s.name}` + (s.compensates ? ` (reverses ${s.compensates})` : ""),
           status: s.status, start: s.createdAt, end: s.endedAt || (last && last.endedAt), detail, order,
           large: s.status === "completed" ? large : null, largeId: `step-${s.id}-result` };
}

// "498 completed, 1 failed, 1 running": the ended first, then the rest as the API counted them.
function groupSummary(group) {
  const rank = (n) => { const i = ["completed", "failed"].indexOf(n); return i < 0 ? 2 : i; };
  const names = Object.keys(group.statuses).sort((a, b) => rank(a) - rank(b));
  return names.map((n) => `${group.statuses[n]} ${n}`).join(", ");
}

function groupEntries(group, first, out) {
  const open = groups.open.has(group.name);
  const shown = group.statuses.failed ? "failed" : group.statuses.running ? "running"
    : group.statuses.completed === group.count ? "completed" : Object.keys(group.statuses)[0];
  const summary = groupSummary(group);
  out.push({ kind: "group", key: group.name, label: `step ${group.name} ×${group.count}`, status: shown,
             statusText: summary, start: first.createdAt, end: null, open,
             detail: `${group.name} ×${group.count}: ${summary}` });
  if (!open) return;
  // the occurrences sort with their group row (stable sort), not at their own times
  (groups.steps.get(group.name) || []).forEach((s, i) =>
    out.push(stepEntry(s, `${group.name}#${i + 1}`, first.createdAt)));
}

// A hook's payload as its row says it: the value, or the start of a large one's preview.
function receivedText(value, large) {
  return large ? large.preview.slice(0, 200) + "…" : JSON.stringify(value);
}

// A hook's payloads: the run's JSON carries its first and last ones and their count
// (payloadCount); the rest are read a page at a time when asked (`load more`), kept here by the
// hook's id and the payload's number, which names the same payload whatever arrives after it.
const HOOK_PAYLOADS_PER_PAGE = 200;
const hookPages = new Map();

function hookEntries(h, out) {
  const count = h.payloadCount;
  // a large payload is sent as its first KiB and a link (payloadPayload), as a step's result
  const large = h.receivedAt ? h.payloadPayload : null;
  const received = h.receivedAt ? receivedText(h.payload, large) : "";
  const more = count > 1 ? ` (payload 1 of ${count})` : "";
  out.push({ kind: "hook", key: h.id, label: `hook ${h.token}`, status: h.status, start: h.createdAt,
             end: h.receivedAt, detail: (h.type ? `type ${h.type}` : "") +
             (h.receivedAt ? ` received ${received}${more}` : ""),
             large, largeId: `hook-${h.id}-payload` });
  if (count < 2) return;
  // a hook that takes several payloads (an `async for` over it): each later one is a row of
  // its own, at the time it came, linked when large as the first is; where payloads are not
  // read yet, one row says how many and loads the next page of them
  // The rows the run's JSON carries are kept with the loaded ones: a payload never changes,
  // and its last ones leave the run's JSON as more arrive, so a refresh of the live feed
  // would otherwise fold rows the page showed back into the "more payloads" row.
  if (!hookPages.has(h.id)) hookPages.set(h.id, new Map());
  const known = hookPages.get(h.id);
  for (const p of [...h.later, ...h.lastPayloads]) known.set(p.n, p);
  let last = { receivedAt: h.receivedAt };
  for (let n = 1; n < count; n++) {
    const p = known.get(n);
    if (p) {
      out.push({ kind: "hook-payload", key: `${h.id}#${n + 1}`, label: `hook ${h.token} #${n + 1}`,
                 status: "received", start: p.receivedAt, end: p.receivedAt,
                 detail: `received ${receivedText(p.payload, p.payloadPayload)}` +
                         ` (payload ${n + 1} of ${count})`,
                 large: p.payloadPayload, largeId: `hook-${h.id}-payload-${n}` });
      last = p;
      continue;
    }
    let end = n;
    while (end < count && !known.has(end)) end++;
    out.push({ kind: "hook-more", key: `${h.id}@${n}`, label: `hook ${h.token}`, status: "received",
               statusText: "not read yet", start: last.receivedAt, end: last.receivedAt,
               detail: `${end - n} more payload${end - n === 1 ? "" : "s"}`,
               more: { hook: h.id, after: n } });
    n = end - 1;
  }
}

// A run that made thousands of hooks (one per loop iteration) sends its first and last ones
// and their count (hookCount); each carries its number n. The hooks loaded since are kept as a
// hook's loaded payloads are, and where hooks are not read yet, one row says how many and
// loads the next page of them. A hook the run's JSON carries is taken from it (it is newer),
// and kept: its last hooks leave the run's JSON as the run makes more, and the page keeps
// drawing them rather than fold them back into the "more hooks" row.
const HOOKS_PER_PAGE = 200;
const hookList = new Map();

function runHooks(run, out) {
  run.hooks.forEach((h, i) => hookList.set(h.n ?? i, h));
  const known = hookList;
  const count = run.hookCount ?? run.hooks.length;
  let last = { createdAt: run.createdAt };
  for (let n = 0; n < count; n++) {
    const h = known.get(n);
    if (h) { hookEntries(h, out); last = h; continue; }
    let end = n;
    while (end < count && !known.has(end)) end++;
    out.push({ kind: "hooks-more", key: `hooks@${n}`, label: "hooks", status: "received",
               statusText: "not read yet", start: last.createdAt, end: last.createdAt,
               detail: `${end - n} more hook${end - n === 1 ? "" : "s"}`,
               more: { hooks: true, after: n } });
    n = end - 1;
  }
}

// A kept hook the run's JSON no longer carries may have changed since the page read it: one
// that waited (the JSON carried it for its form) took its payload, or the run's end disposed
// of it. The kept hooks drawn as waiting that this JSON leaves out are read again, a page of
// at most 1,000 numbers at a time, and the timeline is drawn again when one of them changed.
async function refreshKept(run) {
  const carriedNow = new Set(run.hooks.map((h, i) => h.n ?? i));
  const stale = [...hookList].filter(([n, h]) => h.status === "waiting" && !carriedNow.has(n))
                             .map(([n]) => n);
  if (!stale.length) return false;
  const base = `/api/runs/${encodeURIComponent(runId)}/hooks`;
  let changed = false;
  for (let from = Math.min(...stale), to = Math.max(...stale); from <= to; from += 1000) {
    const page = await wl.api(`${base}?after=${from}&limit=${Math.min(1000, to - from + 1)}`);
    for (const h of page.hooks) {
      const kept = hookList.get(h.n);
      if (!kept) continue; // a hook the page never drew stays in its "more hooks" row
      changed ||= kept.status !== h.status;
      hookList.set(h.n, h);
    }
  }
  return changed;
}

// The next page of hooks or of a hook's payloads (`more` says which), from number `after`,
// kept with those loaded before, then the timeline again.
async function loadMore(more, button) {
  button.disabled = true;
  const run = `/api/runs/${encodeURIComponent(runId)}`;
  try {
    if (more.hooks) {
      const page = await wl.api(`${run}/hooks?after=${more.after}&limit=${HOOKS_PER_PAGE}`);
      for (const h of page.hooks) hookList.set(h.n, h);
    } else {
      const page = await wl.api(`${run}/hooks/${encodeURIComponent(more.hook)}/payloads` +
                                `?after=${more.after}&limit=${HOOK_PAYLOADS_PER_PAGE}`);
      if (!hookPages.has(more.hook)) hookPages.set(more.hook, new Map());
      for (const p of page.payloads) hookPages.get(more.hook).set(p.n, p);
    }
    document.getElementById("message").textContent = "";
  } catch (err) {
    button.disabled = false;
    document.getElementById("message").textContent = err.message;
    return;
  }
  if (drawn.run) timeline(drawn.run);
}

function entries(run) {
  const out = [];
  const grouped = new Map((run.stepGroups || []).map((g) => [g.name, g]));
  const placed = new Set();
  for (const s of run.steps) {
    const group = grouped.get(s.name);
    if (!group) { out.push(stepEntry(s, s.name)); continue; }
    if (placed.has(s.name)) continue;
    placed.add(s.name);
    groupEntries(group, s, out);
  }
  runHooks(run, out);
  for (const w of run.waits) {
    out.push({ kind: "sleep", key: w.id, label: `sleep ${w.id}`, status: w.early ? "woken early" : w.status,
               start: w.createdAt, end: w.completedAt, detail: `until ${wl.time(w.resumeAt)}` });
  }
  for (const c of run.children) {
    out.push({ kind: "child", key: c.id, label: `child ${c.workflow}`, status: c.status, start: c.createdAt,
               end: c.endedAt, detail: c.runId, link: "/runs/" + encodeURIComponent(c.runId) });
  }
  const at = (e) => (e.order !== undefined ? e.order : e.start);
  return out.sort((a, b) => at(a) - at(b));
}

function timeline(run) {
  drawn.run = run;
  drawn.origin = run.createdAt;
  drawn.finish = run.endedAt || Date.now() / 1000;
  drawn.span = Math.max(drawn.finish - drawn.origin, 0.001);
  drawn.rows = entries(run);
  const long = drawn.rows.length > VIRTUAL_AFTER;
  document.getElementById("timeline-box").classList.toggle("long", long);
  document.getElementById("timeline-count").textContent = long ? `(${drawn.rows.length} entries)` : "";
  draw();
}

// Draws the rows the box shows now; called again on every scroll, once per frame at most.
function draw() {
  const body = document.querySelector("#timeline tbody");
  const box = document.getElementById("timeline-box");
  const rows = drawn.rows;
  const long = rows.length > VIRTUAL_AFTER;
  const height = drawn.rowHeight || 26; // measured once a row is drawn, below
  let first = 0, last = rows.length;
  if (long) {
    first = Math.max(0, Math.floor(box.scrollTop / height) - MARGIN);
    last = Math.min(rows.length, Math.ceil((box.scrollTop + box.clientHeight) / height) + MARGIN);
  }
  const out = [];
  if (first > 0) out.push(spacer(first * height));
  for (let i = first; i < last; i++) out.push(row(rows[i], long));
  if (last < rows.length) out.push(spacer((rows.length - last) * height));
  body.replaceChildren(...out);
  if (long && !drawn.rowHeight) {
    // every long row is one line high (CSS: .timeline-box.long), so one measure fits all
    const measured = body.querySelector("tr[data-kind]").getBoundingClientRect().height;
    if (measured > 0) { drawn.rowHeight = measured; draw(); }
  }
}

function spacer(height) {
  const tr = document.createElement("tr");
  tr.className = "spacer";
  const td = document.createElement("td");
  td.colSpan = 5;
  td.style.height = height + "px";
  tr.append(td);
  return tr;
}

function row(e, long) {
  const tr = document.createElement("tr");
  tr.dataset.kind = e.kind;
  tr.dataset.key = e.key;
  const what = document.createElement("td");
  if (e.kind === "group") {
    tr.classList.add("group");
    const button = wl.text("button", e.open ? "▾" : "▸", "expand");
    button.type = "button";
    button.title = e.open ? "close the group" : "show every occurrence";
    button.addEventListener("click", () => toggleGroup(e.key));
    what.append(button, " " + e.label);
  } else if (e.link) { const a = wl.text("a", e.label); a.href = e.link; what.append(a); }
  else what.textContent = e.label;
  const track = document.createElement("td");
  track.className = "track";
  const bar = wl.text("div", null, "bar " + e.status);
  const left = ((e.start - drawn.origin) / drawn.span) * 100;
  const width = (((e.end || drawn.finish) - e.start) / drawn.span) * 100;
  bar.style.marginLeft = Math.min(left, 100) + "%";
  bar.style.width = Math.max(Math.min(width, 100 - left), 0.5) + "%";
  track.append(bar);
  // one line per row in a long timeline (the virtual rows' height is one measure); the whole
  // detail is the cell's title
  const detail = wl.text("td", long ? e.detail.replaceAll("\n", "; ") : e.detail, "mono");
  if (long) detail.title = e.detail;
  else detail.style.whiteSpace = "pre-wrap";
  if (e.large) detail.append(" ", showAll(e.largeId, e.large, detail));
  if (e.more) {
    const button = wl.text("button", "load more", "more");
    button.type = "button";
    button.title = e.more.hooks ? `the next ${HOOKS_PER_PAGE} hooks`
                                : `the next ${HOOK_PAYLOADS_PER_PAGE} payloads`;
    button.addEventListener("click", () => loadMore(e.more, button));
    detail.append(" ", button);
  }
  tr.append(wl.text("td", "+" + wl.duration(e.start - drawn.origin)), what,
            wl.text("td", e.statusText || e.status, "status " + e.status), detail, track);
  return tr;
}

// A run's input or output: the value, or for a large one (the API sends its first KiB, its
// size and a link instead: docs/console.md) the first KiB and a link that shows all of it.
function payload(id, value, large, shown) {
  const cell = document.getElementById(id);
  if (!shown) { cell.replaceChildren(); return; }
  if (!large) { cell.textContent = JSON.stringify(value); return; }
  const preview = wl.text("div", large.preview + "…", "preview");
  preview.id = id + "-preview";
  cell.replaceChildren(preview, showAll(id, large, cell));
}

// The "show all (N bytes)" link of a large value (a run's input or output, a step's result,
// a hook's payload),
// whose id is `${id}-all`; a read that fails shows its error after it, as `${id}-error`, in
// `cell`. A value whose blob is gone says so at once: the API sends its error with its size.
function showAll(id, large, cell) {
  const all = wl.text("a", `show all (${large.bytes} bytes)`);
  all.id = id + "-all";
  all.href = large.href;
  all.target = "_blank";
  const failed = (message) => {
    const old = document.getElementById(id + "-error");
    if (old) old.remove();
    const error = wl.text("div", message, "error");
    error.id = id + "-error";
    cell.append(error);
  };
  if (large.error) queueMicrotask(() => failed(`${large.error.code}: ${large.error.message}`));
  all.addEventListener("click", async (event) => {
    if (!wl.token()) return; // the link itself: a console whose reads need no token
    // a token travels in a header, which a link cannot send: read it here, then show it
    event.preventDefault();
    // The window opens in the click itself: a popup blocker may refuse one opened after the
    // read, once the click's user activation has run out. It is closed again if the read fails,
    // and the error is shown here instead of an error's JSON passed off as the value.
    const shown = window.open("", "_blank");
    const refused = (message) => { if (shown) shown.close(); failed(message); };
    let response;
    try {
      response = await fetch(large.href, { headers: { Authorization: "Bearer " + wl.token() } });
    } catch (err) {
      refused(String(err));
      return;
    }
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      refused(body.error ? `${body.error.code}: ${body.error.message}` : response.statusText);
      return;
    }
    const url = URL.createObjectURL(await response.blob());
    if (shown) shown.location.href = url;
    else window.open(url, "_blank");
  });
  return all;
}

document.getElementById("timeline-box").addEventListener("scroll", () => {
  if (drawn.pending) return;
  drawn.pending = true;
  requestAnimationFrame(() => { drawn.pending = false; draw(); });
});

// The occurrences of one group, every page of them.
async function groupSteps(name) {
  const steps = [];
  let cursor = "0";
  while (cursor) {
    const page = await wl.api(`/api/runs/${encodeURIComponent(runId)}/steps?group=` +
                              `${encodeURIComponent(name)}&after=${cursor}&limit=${STEPS_PER_PAGE}`);
    steps.push(...page.steps);
    cursor = page.nextCursor;
  }
  groups.steps.set(name, steps);
}

async function toggleGroup(name) {
  if (groups.open.has(name)) groups.open.delete(name);
  else {
    await groupSteps(name);
    groups.open.add(name);
  }
  if (drawn.run) timeline(drawn.run);
}

// When the first rows, and then the whole timeline, were first drawn (performance marks):
// the figures in docs/console.md are read from them.
function mark(name) {
  if (!performance.getEntriesByName(name).length) performance.mark(name);
}

// The steps after the run's first page, a page at a time.
async function restOfSteps(run) {
  const steps = [];
  let cursor = run.nextStepCursor;
  while (cursor) {
    const page = await wl.api(`/api/runs/${encodeURIComponent(runId)}/steps` +
                              `?after=${encodeURIComponent(cursor)}&limit=${STEPS_PER_PAGE}`);
    steps.push(...page.steps);
    cursor = page.nextCursor;
  }
  return steps;
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
      (run.waitingForWorker ? ` — ${run.waitingForWorker}` : "") +
      // read from the archive (wayline archive): its payloads stream from where it keeps them
      (run.archived ? " — archived" : "");
    for (const id of ["cancel", "terminate"]) document.getElementById(id).disabled = wl.readOnly || !!run.endedAt;
    payload("input", run.input, run.inputPayload, true);
    payload("output", run.output, run.outputPayload, run.status === "completed");
    document.getElementById("error").textContent = run.error ? JSON.stringify(run.error) : "";
    document.getElementById("story").textContent = run.story;
    timeline(run); // the first page now: the page is usable while the rest arrives
    mark("wayline:first-rows");
    hooks(run);
    if (await refreshKept(run)) timeline(run);
    if (run.nextStepCursor) {
      run.steps.push(...await restOfSteps(run));
      timeline(run);
    }
    if (groups.open.size) { // the open groups' occurrences as they are now
      await Promise.all([...groups.open].map(groupSteps));
      timeline(run);
    }
    mark("wayline:timeline");
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
