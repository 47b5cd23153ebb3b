// The form that resumes one hook. A typed hook's form is built from the shape recorded with
// it (its required fields and their JSON types, and the same for each nested model): one input
// per field, a fieldset per nested model, checked in the browser
// before it is sent; the server validates the payload again against the hook's class, so a
// rule the shape cannot say (a range, a pattern) is refused there and the refusal shown here.
// A hook with no recorded shape takes any JSON in a text area.
"use strict";

// A boolean field by one of these names makes the form an approval: Approve and Reject
// buttons set it, instead of a checkbox and a Resume button.
wl.APPROVAL_FIELD = /^(approved?|accept(ed)?|allow(ed)?|ok)$/i;

wl.hookForm = (hook, after) => {
  const form = document.createElement("form");
  form.dataset.token = hook.token;
  form.noValidate = true; // checked by `collect` below, which also says what is wrong in words
  const fields = hook.shape && hook.shape.fields && Object.keys(hook.shape.fields).length
    ? wl.shapeFields(hook.shape) : null;
  const said = wl.text("div", "", "said");
  let collect;
  if (fields) {
    form.classList.add("typed");
    for (const field of fields) if (field.label) form.append(field.label);
    collect = (submitter) => wl.collectFields(fields, submitter);
  } else {
    const area = document.createElement("textarea");
    area.name = "payload";
    area.placeholder = hook.type ? `a JSON ${hook.type}` : "any JSON value";
    form.append(area);
    collect = () => {
      try {
        return { payload: JSON.parse(area.value || "null") };
      } catch (err) {
        return { problems: [`not JSON: ${err.message}`] };
      }
    };
  }
  const approval = fields && fields.find((f) => f.approval);
  const buttons = approval
    ? [wl.text("button", "Approve", "approve"), wl.text("button", "Reject", "reject")]
    : [wl.text("button", "Resume")];
  if (approval) { buttons[0].value = "approve"; buttons[1].value = "reject"; }
  for (const button of buttons) {
    button.type = "submit";
    button.disabled = wl.readOnly;
  }
  form.append(...buttons, said);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    said.className = "said";
    const { payload, problems } = collect(event.submitter);
    if (problems && problems.length) {
      said.className = "said error";
      said.textContent = problems.join("; ");
      return;
    }
    try {
      const done = await wl.api(`/api/hooks/${encodeURIComponent(hook.token)}/resume`, {
        method: "POST",
        body: JSON.stringify({ payload }),
        headers: { "Idempotency-Key": crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) },
      });
      said.className = "said ok";
      said.textContent = `resumed (run ${done.runId})`;
      if (after) after();
    } catch (err) {
      said.className = "said error";
      said.textContent = err.message;
    }
  });
  return form;
};

// One input per field of a recorded shape: {name, kinds, required, input, label, approval}. A
// field that is a nested model (the shape's `nested`) is a fieldset of its own fields, to any
// depth the shape recorded; its inputs are named by their path (`address.street`). Only a
// top-level boolean makes the form an approval.
wl.shapeFields = (shape, at = "") => {
  const required = new Set(shape.required || []);
  const nested = shape.nested || {};
  const out = [];
  let approvalTaken = at !== "";
  for (const [name, given] of Object.entries(shape.fields)) {
    const kinds = Array.isArray(given) ? given : [];
    const solid = kinds.filter((k) => k !== "null");
    const kind = solid.length === 1 ? solid[0] : "json";
    const field = { name, path: at + name, kind, nullable: kinds.includes("null"), required: required.has(name) };
    const inner = nested[name];
    if (inner && inner.fields && Object.keys(inner.fields).length) {
      field.kind = "model";
      field.fields = wl.shapeFields(inner, field.path + ".");
      const box = document.createElement("fieldset");
      box.dataset.path = field.path;
      box.append(wl.text("legend", name + (field.required ? " *" : "")));
      for (const f of field.fields) box.append(f.label);
      field.label = box;
      out.push(field);
      continue;
    }
    if (kind === "boolean" && !approvalTaken && wl.APPROVAL_FIELD.test(name)) {
      field.approval = approvalTaken = true;
      out.push(field);
      continue;
    }
    let input;
    if (kind === "boolean") {
      input = document.createElement("input");
      input.type = "checkbox";
    } else if (kind === "integer" || kind === "number") {
      input = document.createElement("input");
      input.type = "number";
      input.step = kind === "integer" ? "1" : "any";
    } else if (kind === "string") {
      input = document.createElement("input");
      input.type = "text";
    } else {
      input = document.createElement("textarea");
      input.placeholder = kinds.length ? `JSON: ${kinds.join(" or ")}` : "JSON";
    }
    input.name = field.path;
    input.required = field.required && kind !== "boolean";
    const label = wl.text("label", null, "field");
    label.append(wl.text("span", name + (field.required ? " *" : "")), input);
    Object.assign(field, { input, label });
    out.push(field);
  }
  return out;
};

// Whether nothing was entered in these fields (a checkbox left clear counts as nothing): an
// optional nested model left so is sent as absent, and takes its default on the server.
wl.fieldsEmpty = (fields) => fields.every((f) =>
  f.kind === "model" ? wl.fieldsEmpty(f.fields)
    : f.approval ? true : f.kind === "boolean" ? !f.input.checked : !f.input.value.trim());

// The payload the fields say, or the problems that keep it from being sent (each named by the
// field's path, `address.street: required`).
wl.collectFields = (fields, submitter) => {
  const payload = {}, problems = [];
  for (const field of fields) {
    const path = field.path || field.name;
    if (field.approval) {
      payload[field.name] = !submitter || submitter.value !== "reject";
      continue;
    }
    if (field.kind === "model") {
      if (!field.required && wl.fieldsEmpty(field.fields)) continue;
      const inner = wl.collectFields(field.fields, submitter);
      problems.push(...inner.problems);
      payload[field.name] = inner.payload;
      continue;
    }
    const input = field.input;
    if (field.kind === "boolean") { payload[field.name] = input.checked; continue; }
    const raw = input.value.trim();
    if (!raw) {
      if (field.required) problems.push(`${path}: required`);
      continue; // an optional field left empty takes its default on the server
    }
    if (!input.checkValidity()) { problems.push(`${path}: ${input.validationMessage}`); continue; }
    if (field.kind === "integer" || field.kind === "number") {
      const value = Number(raw);
      if (!Number.isFinite(value) || (field.kind === "integer" && !Number.isInteger(value))) {
        problems.push(`${path}: expected ${field.kind}`);
      } else payload[field.name] = value;
    } else if (field.kind === "string") {
      payload[field.name] = input.value;
    } else {
      try {
        payload[field.name] = JSON.parse(raw);
      } catch (err) {
        problems.push(`${path}: not JSON (${err.message})`);
      }
    }
  }
  return { payload, problems };
};
