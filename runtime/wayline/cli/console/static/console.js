// The Wayline console's pages: they read the HTTP API (/api/openapi.json) and read it again
// when the server's change feed (/api/live, server-sent events) says something may differ.
"use strict";

const wl = {};

wl.token = () => sessionStorage.getItem("wayline-token") || "";

wl.api = async (path, options = {}) => {
  const headers = Object.assign({ "Content-Type": "application/json" }, options.headers || {});
  if (wl.token()) headers.Authorization = "Bearer " + wl.token();
  const response = await fetch(path, Object.assign({}, options, { headers }));
  const body = await response.json();
  if (!response.ok) {
    const err = new Error(body.error ? `${body.error.code}: ${body.error.message}` : response.statusText);
    err.body = body;
    throw err;
  }
  return body;
};

wl.text = (tag, text, cls) => {
  const el = document.createElement(tag);
  if (text !== undefined && text !== null) el.textContent = String(text);
  if (cls) el.className = cls;
  return el;
};

// A table cell that links to a run's page.
wl.runCell = (runId) => {
  const link = wl.text("a", runId, "mono");
  link.href = "/runs/" + encodeURIComponent(runId);
  const cell = document.createElement("td");
  cell.append(link);
  return cell;
};

wl.time = (epoch) => (epoch ? new Date(epoch * 1000).toLocaleString() : "");

wl.duration = (seconds) => {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 1) return `${Math.round(seconds * 1000)}ms`;
  if (seconds < 120) return `${seconds.toFixed(1)}s`;
  return `${Math.round(seconds / 60)}m`;
};

// The header: links, and the token that actions need (kept for this tab only).
wl.header = async () => {
  const info = await wl.api("/api/info");
  const header = document.querySelector("header");
  const auth = wl.text("span", null, "auth");
  if (info.readOnly) {
    auth.append(wl.text("span", "read-only console", "muted"));
  } else {
    const input = document.createElement("input");
    input.type = "password";
    input.id = "token";
    input.placeholder = "bearer token for actions";
    input.value = wl.token();
    input.addEventListener("change", () => sessionStorage.setItem("wayline-token", input.value));
    auth.append(input);
  }
  header.append(auth);
  wl.readOnly = info.readOnly;
  document.getElementById("world").textContent = info.world;
  return info;
};

// Calls `reload` now and whenever the change feed says so; a dropped feed reconnects by itself.
wl.live = (query, reload) => {
  const source = new EventSource("/api/live" + query);
  let busy = false, again = false;
  source.addEventListener("change", async () => {
    if (busy) { again = true; return; }
    busy = true;
    try {
      do { again = false; await reload(); } while (again);
    } finally { busy = false; }
  });
  window.addEventListener("beforeunload", () => source.close());
  return source;
};

// Draws the page now, whenever the change feed says so and, with `every` (ms), on a timer too
// (for what changes no run, such as a worker's heartbeat); a failure is said in #message.
wl.start = (query, draw, every) => {
  const message = () => document.getElementById("message");
  const load = async () => {
    try {
      await draw();
      message().textContent = "";
    } catch (err) {
      message().textContent = err.message;
    }
  };
  wl.header().then(() => {
    wl.live(query, load);
    if (every) setInterval(load, every);
  });
};
