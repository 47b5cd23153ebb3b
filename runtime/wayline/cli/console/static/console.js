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

// The header: links, and the token that actions need (kept for this tab only). A console whose
// reads need the token too (a pod's, `--reads-need-token`) answers 401 until one is given:
// the field then asks for it, and the page is drawn again once it is.
wl.tokenField = (placeholder, reload) => {
  const input = document.createElement("input");
  input.type = "password";
  input.id = "token";
  input.placeholder = placeholder;
  input.value = wl.token();
  input.addEventListener("change", () => {
    sessionStorage.setItem("wayline-token", input.value);
    if (reload) window.location.reload();
  });
  return input;
};

wl.header = async () => {
  const header = document.querySelector("header");
  const auth = wl.text("span", null, "auth");
  header.append(auth);
  let info;
  try {
    info = await wl.api("/api/info");
  } catch (err) {
    if (!err.body || !err.body.error || err.body.error.code !== "UNAUTHORIZED") throw err;
    auth.append(wl.tokenField("bearer token to read", true));
    const said = "this console needs its bearer token: paste it at the top right";
    const box = document.getElementById("message");
    if (box) box.textContent = said;
    throw new Error(said);
  }
  if (info.readOnly) {
    auth.append(wl.text("span", "read-only console", "muted"));
  } else {
    auth.append(wl.tokenField("bearer token for actions", false));
  }
  wl.readOnly = info.readOnly;
  document.getElementById("world").textContent = info.world;
  return info;
};

// Calls `reload` now and whenever the change feed says so. The feed is read with fetch rather
// than EventSource, which cannot send the Authorization header a console whose reads need the
// token asks for; a dropped feed is opened again after a second.
wl.live = (query, reload) => {
  let busy = false, again = false, stopped = false;
  const changed = async () => {
    if (busy) { again = true; return; }
    busy = true;
    try {
      do { again = false; await reload(); } while (again);
    } finally { busy = false; }
  };
  const controller = new AbortController();
  const follow = async () => {
    while (!stopped) {
      try {
        const headers = wl.token() ? { Authorization: "Bearer " + wl.token() } : {};
        const response = await fetch("/api/live" + query, { headers, signal: controller.signal });
        if (!response.ok || !response.body) throw new Error(response.statusText);
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffered = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffered += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffered.indexOf("\n\n")) >= 0) {
            const message = buffered.slice(0, end);
            buffered = buffered.slice(end + 2);
            if (message.split("\n").includes("event: change")) changed();
          }
        }
      } catch (err) {
        if (stopped) return;
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };
  follow();
  window.addEventListener("beforeunload", () => { stopped = true; controller.abort(); });
  return { close: () => { stopped = true; controller.abort(); } };
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
