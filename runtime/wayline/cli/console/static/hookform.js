// The form that resumes one hook. A typed hook's form is built from the shape recorded with
// it (its required fields and their JSON types, and the same for each nested model, each item
// model of a list and each branch of a union of models): one input per field, a fieldset per
// nested model, a list's items added and removed one by one, a union's branch chosen from a
// list of its branches, a Literal's values chosen from a list, a union of plain types (`int |
// str`) a choice of the type and then its input, a list of plain values one typed input per
// item; checked in the browser before it is sent; the server validates the payload again against the hook's class, so a
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
  const fields = wl.isShape(hook.shape) ? wl.shapeFields(hook.shape) : null;
  const said = wl.text("div", "", "said");
  let collect;
  if (fields) {
    form.classList.add("typed");
    for (const field of fields) if (field.label) form.append(field.label);
    collect = (submitter) => wl.collectFields(fields, submitter, "");
  } else {
    const area = wl.jsonArea([]);
    area.name = "payload";
    area.placeholder = hook.type ? `a JSON ${hook.type}` : "any JSON value";
    form.append(area);
    collect = () => {
      const problem = area.value.trim() ? wl.jsonProblem(area.value, []) : null;
      return problem ? { problems: [problem] } : { payload: JSON.parse(area.value || "null") };
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

// One input per field of a recorded shape: {name, kind, required, nullable, label, ...}. A
// field that is a nested model (the shape's `nested`) is a fieldset of its own fields, to any
// depth the shape recorded; a list of models (`items`) a fieldset of item fieldsets with Add
// and Remove buttons; a union of models (`unions`) a fieldset with a choice of its branch and
// the chosen branch's fields. Inputs are named by their path when made (`address.street`,
// `lines.0.sku`, `pay.Card.number`); problems are named by the path at the time they are
// found (`lines[1].sku`). Only a top-level boolean makes the form an approval.
// A shape is read from the log, which anyone who can write the world can write: each part
// that is not what a writer makes (a branch that is null, a list of nothing) is taken as JSON.
wl.shapeFields = (shape, at = "", depth = 0) => {
  const required = new Set(Array.isArray(shape.required) ? shape.required : []);
  const nested = wl.dict(shape.nested), unions = wl.dict(shape.unions), items = wl.dict(shape.items);
  const values = wl.dict(shape.values), lists = wl.dict(shape.lists), maps = wl.dict(shape.maps);
  const several = wl.dict(shape.choices);
  const out = [];
  let approvalTaken = at !== "";
  for (const [name, given] of Object.entries(wl.dict(shape.fields))) {
    const kinds = Array.isArray(given) ? given : [];
    const solid = kinds.filter((k) => k !== "null");
    const kind = solid.length === 1 ? solid[0] : "json";
    const field = { name, path: at + name, kind, nullable: kinds.includes("null"), required: required.has(name) };
    // below MAX_DEPTH levels (deeper than any writer records: a forged shape) a field is
    // JSON in a text area, so no shape read from the log builds a page without end
    const deep = depth >= wl.MAX_DEPTH;
    const inner = deep ? undefined : wl.own(nested, name), union = deep ? undefined : wl.own(unions, name);
    const element = deep ? {} : wl.dict(wl.own(items, name));
    const choices = wl.own(values, name);
    // a model (or a union of models) or a plain value (`Model | int`), or a list
    // (`Model | list[int]`, `list[int] | str`): a choice of the type
    const plainToo = wl.plainKinds(solid);
    // two kinds of list (`list[int] | list[str]`, the shape's `lists`): a choice of which
    const either = solid.includes("array") && !deep ? wl.listsOf({ lists: wl.own(lists, name) }, depth) : null;
    const listToo = either ? either.lists
      : solid.includes("array") && wl.isElement(element) ? element : null;
    // a mapping (`dict[str, int]`, the shape's `maps`), maybe or a model (`Model | dict[str,
    // int]`): key/value rows, or a choice of the model and `mapping`
    const mapped = solid.includes("object") && !deep ? wl.mapOf(wl.own(maps, name), depth) : null;
    // several kinds of thing `maps` and `nested` do not say (`dict[str, int] | A | B`): a
    // choice of each model, `mapping`, the list and each plain type, as a list's item is
    const chosen = !mapped && !deep ? wl.either({ choices: wl.dict(wl.own(several, name)).choices }, depth) : null;
    if (chosen) {
      const map = chosen.map || {};
      out.push(wl.unionField(field, chosen.union, depth, chosen.kinds, chosen.list, chosen.values, map.map || null, map.key));
      continue;
    }
    if (mapped) {
      const title = mapped.model && typeof mapped.model.title === "string" && mapped.model.title ? mapped.model.title : name;
      if (!mapped.model && !plainToo.length && !listToo) out.push(wl.mapField(field, mapped.map, depth, mapped.key));
      else {
        const branches = { branches: mapped.model ? [{ title, shape: mapped.model }] : [] };
        out.push(wl.unionField(field, branches, depth, plainToo, listToo, undefined, mapped.map, mapped.key));
      }
      continue;
    }
    const modelToo = wl.isShape(inner) || wl.isUnion(union);
    if ((modelToo && (plainToo.length || listToo)) || (listToo && plainToo.length) || either) {
      // a model's title, or, in a shape recorded before a model-or-list field's model had one
      // (by a worker at 337bb92 or older), the field's name, as the recorder names a model
      // without a title
      const title = typeof wl.dict(inner).title === "string" && inner.title ? inner.title : name;
      const branches = wl.isUnion(union) ? union
        : { branches: wl.isShape(inner) ? [{ title, shape: inner }] : [] };
      out.push(wl.unionField(field, branches, depth, plainToo, listToo));
      continue;
    }
    if (wl.isShape(inner)) {
      out.push(wl.modelField(field, inner, depth));
      continue;
    }
    if (wl.isUnion(union)) {
      out.push(wl.unionField(field, union, depth));
      continue;
    }
    if (wl.isElement(element)) {
      out.push(wl.listField(field, element, depth));
      continue;
    }
    if (wl.isChoice(choices) || (solid.length > 1 && wl.plainKinds(solid).length === solid.length)) {
      // a Literal's values, or a union of plain values (`int | str`): a choice, then its input
      out.push(wl.leafField(field, kinds, choices));
      continue;
    }
    if (kind === "boolean" && !approvalTaken && wl.APPROVAL_FIELD.test(name)) {
      field.approval = approvalTaken = true;
      out.push(field);
      continue;
    }
    const input = wl.typedInput(kind, kinds);
    input.name = field.path;
    input.required = field.required && kind !== "boolean";
    const label = wl.text("label", null, "field");
    label.append(wl.text("span", name + (field.required ? " *" : "")), input);
    Object.assign(field, { input, label });
    out.push(field);
  }
  return out;
};

// An input for one JSON type: a checkbox, a number (whole for an integer), a text; any other
// type (an object, a list of what the shape does not say) is JSON in a text area.
wl.typedInput = (kind, kinds) => {
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
    input = wl.jsonArea(kinds);
  }
  return input;
};

// A JSON value's text area, for a field whose shape says no more than its JSON type (`Any`,
// `object`, `JsonValue`: any JSON value; `dict[str, Any]`: an object; `list[Any]`: a list; a
// part past the recorded levels, or one no writer makes). Its placeholder says what it takes
// (`any JSON value`, `a JSON object`), and it is checked as it is typed: text that is no JSON,
// or JSON of another type than an object or a list the shape names, marks it invalid with the
// reason, and the form refuses it by its place before anything is sent.
wl.JSON_TYPES = { object: "a JSON object", array: "a JSON list", null: "null" };
wl.jsonArea = (kinds) => {
  const area = document.createElement("textarea");
  area.jsonKinds = kinds;
  area.placeholder = wl.jsonWhat(kinds);
  area.addEventListener("input", () => {
    const problem = area.value.trim() ? wl.jsonProblem(area.value, kinds) : null;
    area.setCustomValidity(problem || "");
    area.title = problem || "";
    area.classList.toggle("bad", Boolean(problem));
  });
  return area;
};

// Whether the shape names only objects, lists and null (the JSON types a text area's value
// is checked against: pydantic takes nothing else for them, so the check refuses no value
// the class takes); for any other kinds (`integer` beside a model past the recorded levels)
// the area takes any JSON and the server judges it.
wl.jsonTyped = (kinds) => Array.isArray(kinds) && kinds.length > 0
  && kinds.every((k) => Object.hasOwn(wl.JSON_TYPES, k)) && kinds.some((k) => k !== "null");
wl.jsonWhat = (kinds) => (wl.jsonTyped(kinds) ? kinds.map((k) => wl.JSON_TYPES[k]).join(" or ") : "any JSON value");
wl.jsonProblem = (raw, kinds) => {
  let value;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    return `not JSON (${err.message})`;
  }
  if (!wl.jsonTyped(kinds)) return null;
  const kind = value === null ? "null" : Array.isArray(value) ? "array" : typeof value === "object" ? "object" : typeof value;
  if (kinds.includes(kind)) return null;
  return `expected ${wl.jsonWhat(kinds)}, got ${wl.JSON_TYPES[kind] || `a ${kind}`}`;
};

// What one input says: `{present, value}`, or `{problem}` (named by `path`).
wl.readInput = (input, kind, required, path) => {
  if (kind === "boolean") return { present: true, value: input.checked };
  const raw = input.value.trim();
  if (!raw) return required ? { problem: `${path}: required` } : { present: false };
  if (!input.checkValidity()) return { problem: `${path}: ${input.validationMessage}` };
  if (kind === "integer" || kind === "number") {
    const value = Number(raw);
    if (!Number.isFinite(value) || (kind === "integer" && !Number.isInteger(value))) {
      return { problem: `${path}: expected ${kind}` };
    }
    // a whole number past 2^53 is rounded by the browser (9007199254740993 would be sent as
    // ...992): refused here rather than sent as another number than the one typed
    if (/^[-+]?\d+$/.test(raw) && !Number.isSafeInteger(value)) {
      return { problem: `${path}: ${raw} is too large for the form (send it through the API)` };
    }
    return { present: true, value };
  }
  if (kind === "string") return { present: true, value: input.value };
  const problem = wl.jsonProblem(raw, Array.isArray(input.jsonKinds) ? input.jsonKinds : []);
  return problem ? { problem: `${path}: ${problem}` } : { present: true, value: JSON.parse(raw) };
};

// A plain value that is not one input: a Literal's values (a <select> of them, shown as JSON),
// or a union of plain types (a <select> of the type, then that type's input; the others are
// kept, hidden, so switching back finds what was typed). Also each item of a list of plain
// values, with the list's element kinds. `field.read(path)` says what it holds.
wl.leafField = (field, kinds, values) => {
  field.kind = "leaf";
  const label = wl.text("label", null, "field");
  label.append(wl.text("span", field.name + (field.required ? " *" : "")));
  if (wl.isChoice(values)) {
    const select = document.createElement("select");
    select.name = field.path;
    select.className = "choice";
    select.append(new Option(field.required ? "(choose)" : "(none)", ""));
    values.forEach((v, i) => select.append(new Option(JSON.stringify(v), String(i))));
    label.append(select);
    field.empty = () => select.value === "";
    field.read = (path) => select.value !== "" ? { present: true, value: values[Number(select.value)] }
      : field.required ? { problem: `${path}: required` } : { present: false };
  } else if (kinds.length && kinds.every((k) => k === "null")) {
    // an item that can only be null (`list[None]`): nothing to type, the item is null
    label.append(wl.text("span", "null", "null"));
    field.empty = () => true;
    field.read = () => ({ present: true, value: null });
  } else {
    // a kind no input holds (a shape written by hand) is typed as JSON
    const plain = wl.plainKinds(kinds).filter((k) => k !== "null");
    const solid = plain.length ? plain : ["json"];
    const inputs = solid.map((kind) => {
      const input = wl.typedInput(kind, solid);
      input.name = solid.length > 1 ? `${field.path}.${kind}` : field.path;
      input.dataset.kind = kind;
      return input;
    });
    let pick = null;
    if (solid.length > 1) {
      pick = document.createElement("select");
      pick.name = field.path;
      pick.className = "kind";
      solid.forEach((kind, i) => pick.append(new Option(kind, String(i))));
      const show = () => inputs.forEach((input, i) => { input.hidden = String(i) !== pick.value; });
      pick.addEventListener("change", show);
      show();
      label.append(pick);
    }
    label.append(...inputs);
    const chosen = () => inputs[pick ? Number(pick.value) : 0];
    field.empty = () => (chosen().type === "checkbox" ? !chosen().checked : !chosen().value.trim());
    field.read = (path) => wl.readInput(chosen(), chosen().dataset.kind, field.required, path);
  }
  field.label = label;
  return field;
};

wl.PLAIN_KINDS = ["string", "integer", "number", "boolean", "null"];
wl.plainKinds = (kinds) => (Array.isArray(kinds) ? kinds.filter((k) => wl.PLAIN_KINDS.includes(k)) : []);
// a literal's values are recorded up to 200 (plain_shapes.MAX_VALUES): a longer list is one
// no writer makes (a forged log), typed in its field's input rather than a choice of them all
wl.MAX_CHOICES = 200;
wl.isChoice = (values) => Array.isArray(values) && values.length > 0
  && values.length <= wl.MAX_CHOICES && values.every((v) => v === null || ["string", "number", "boolean"].includes(typeof v));

wl.dict = (value) => (value && typeof value === "object" && !Array.isArray(value) ? value : {});
wl.own = (object, key) => (Object.hasOwn(object, key) ? object[key] : undefined);
wl.isShape = (shape) => Object.keys(wl.dict(wl.dict(shape).fields)).length > 0;
// what a list's item is: a model, a union of models, a plain value, or a list of one of these
wl.isElement = (element, depth = 0) => depth < wl.MAX_DEPTH && (wl.isShape(element.shape)
  || wl.isUnion(element.union) || wl.plainKinds(element.kinds).length > 0
  || wl.isElement(wl.dict(element.list), depth + 1) || wl.either(element, depth) !== null
  || wl.listsOf(element, depth) !== null || wl.mapOf(element, depth) !== null);
// how many fieldsets deep a form goes (the recorder follows 16 levels: hooks._NESTED_DEPTH)
wl.MAX_DEPTH = 32;
wl.isUnion = (union) => Array.isArray(wl.dict(union).branches) && union.branches.length > 1
  && union.branches.every((b) => wl.isShape(wl.dict(b).shape));

wl.box = (field, legend) => {
  const box = document.createElement("fieldset");
  box.dataset.path = field.path;
  box.append(wl.text("legend", legend + (field.required ? " *" : "")));
  return box;
};

wl.modelField = (field, shape, depth) => {
  field.kind = "model";
  field.fields = wl.shapeFields(shape, field.path + ".", depth + 1);
  field.label = wl.box(field, field.name);
  for (const f of field.fields) field.label.append(f.label);
  return field;
};

// A list's item that may be several kinds of thing (`options`: `list[Model | int]`,
// `list[list[int] | None]`): the union of its models, its list and its plain values that
// `unionField` makes a choice of, or null for a part no writer makes.
// A writer records at most three options (its models, its list, its plain values): more are a
// forged log's, taken as JSON, so that no row of thousands of fieldsets is built on each Add.
// `choices` say the same of what `options` do not (a model beside two kinds of list, a
// mapping beside two models or a list), with a `lists` element (a branch per list) and a
// `map` element (a `mapping` branch); a writer records four at most.
wl.MAX_OPTIONS = 3;
wl.MOST_CHOICES = 4;
wl.either = (element, depth = 0) => {
  const chosen = Array.isArray(element.choices);
  const given = chosen ? element.choices : element.options;
  const options = Array.isArray(given) ? given.map(wl.dict) : [];
  if (options.length > (chosen ? wl.MOST_CHOICES : wl.MAX_OPTIONS)) return null;
  const union = { branches: [] };
  let list = null, kinds = [], values, map = null;
  for (const option of options) {
    // each part is judged once: judging one twice at each level of a forged shape nested 32
    // deep (a mapping's value that is again choices) would be 2^32 looks, a page that hangs
    const lists = chosen && Array.isArray(option.lists) ? wl.listsOf(option, depth) : null;
    const mapped = chosen && Object.hasOwn(option, "map") ? wl.mapOf(option, depth) : null;
    if (wl.isShape(option.shape)) union.branches.push({ title: option.shape.title, shape: option.shape });
    else if (wl.isUnion(option.union)) Object.assign(union, option.union, { branches: [...union.branches, ...option.union.branches] });
    else if (wl.isElement(wl.dict(option.list), depth + 1)) list = wl.dict(option.list);
    else if (lists) list = lists.lists;
    else if (mapped) map = mapped;
    else if (wl.plainKinds(option.kinds).length) { kinds = wl.plainKinds(option.kinds); values = option.values; }
    else return null;
  }
  const count = union.branches.length + (list ? 1 : 0) + (map ? 1 : 0) + kinds.filter((k) => k !== "null").length;
  return options.length > 1 && count > 0 ? { union, list, kinds, values, map } : null;
};

// An item or field that is one of several kinds of list (`lists`: `list[int] | list[str]`),
// maybe a plain value too (`plain`: null in `list[list[int] | list[str] | None]`): what
// `unionField` makes a choice of, a branch per list, or null for a part no writer makes.
wl.listsOf = (element, depth = 0) => {
  const given = Array.isArray(element.lists) ? element.lists.map(wl.dict) : [];
  if (given.length < 2 || given.length > wl.MAX_OPTIONS) return null;
  if (!given.every((e) => wl.isElement(e, depth + 1))) return null;
  const plain = wl.dict(element.plain);
  return { union: { branches: [] }, lists: given, kinds: wl.plainKinds(plain.kinds), values: plain.values };
};

// A mapping (`map`: what each value is, as a list's item is said, or `{"any": true}` for any
// JSON value: `dict[str, Any]`), what its key is (`key`, absent for a string key), and the
// model it may be instead (`or`), or null for a part no writer makes.
wl.mapOf = (element, depth = 0) => {
  const given = wl.dict(element);
  const inner = wl.dict(given.map);
  if (!Object.hasOwn(given, "map") || !(inner.any === true || wl.isElement(inner, depth + 1))) return null;
  const model = wl.dict(wl.dict(given.or).shape);
  return { map: inner, model: wl.isShape(model) ? model : null, key: wl.dict(given.key) };
};

// A mapping's form: the rows of a list, each with a key input above its value; the keys must
// be given, be of the key's kind and differ (`stock[1]: key required`, `ids[0]: key expected
// integer`), and each value is named by its key.
// A mapping whose keys no JSON object can hold (`dict[Literal[1], int]`: an object's keys are
// strings, and the class takes no `"1"` for `1`) can only be empty: it has no Add button, and
// says so.
wl.mapField = (field, element, depth, key = {}) => {
  field.keyed = true;
  field.keyShape = wl.dict(key);
  wl.listField(field, element, depth);
  field.kind = "map";
  if (wl.keyValues(field.keyShape) === "none") {
    const add = field.label.querySelector(":scope > button.add");
    add.disabled = true;
    const values = field.keyShape.values.map((v) => JSON.stringify(v)).join(", ");
    add.before(wl.text("p", `no key can be given: this mapping's keys (${values}) are no JSON object's keys, so it can only be empty`, "keyless"));
  }
  return field;
};

// What a list's item is called in a choice between lists (`list[integer]`, `list[Coin]`).
wl.itemTitle = (element, depth = 0) => {
  const kinds = wl.plainKinds(element.kinds);
  if (kinds.length) return wl.isChoice(element.values) ? "value" : kinds.join(" | ");
  if (wl.isShape(element.shape)) return typeof element.shape.title === "string" && element.shape.title ? element.shape.title : "model";
  if (wl.isUnion(element.union)) return "union";
  if (element.list && depth < wl.MAX_DEPTH) return `list[${wl.itemTitle(wl.dict(element.list), depth + 1)}]`;
  return "item";
};

// A union of models: a <select> of its branches (and "none" where the field may be left out
// or null), and the chosen branch's fields; the other branches' fieldsets are kept, hidden, so
// switching back finds what was typed. A discriminated union's tag is no input: the branch
// chosen sets it. `plain` are the plain types the field may also be (`Model | int`): a branch
// each, named by the type, holding that type's input (or one branch, `value`, a choice of a
// literal's `values`). `list` is the item of a list the field may also be (`Model |
// list[int]`): a branch named `list`, holding the list's rows with Add and Remove; several
// lists (`list[int] | list[str]`) a branch each, named by its item (`list[integer]`).
wl.unionField = (field, union, depth, plain = [], list = null, values = undefined, map = null, mapKey = {}) => {
  field.kind = "union";
  field.tag = typeof union.tag === "string" ? union.tag : null;
  field.label = wl.box(field, field.name);
  const select = document.createElement("select");
  select.name = field.path;
  select.className = "branch";
  const none = !field.required || field.nullable;
  if (none) select.append(new Option("(none)", ""));
  // each choice is named once: a model titled as a plain type is `integer (model)`, a second
  // model of one title `Item (2)` (titles are the log's: two classes may share a name), and
  // one titled `(none)` where that choice sends nothing or null is `(none) (model)`
  const kinds = plain.filter((k) => k !== "null");
  const literal = wl.isChoice(values) && kinds.length > 0;
  const names = literal ? ["value"] : kinds, taken = new Set(names);
  const listed = list == null ? [] : Array.isArray(list) ? list : [list];
  const listNames = [];
  for (const element of listed) {
    const base = listed.length === 1 ? "list" : `list[${wl.itemTitle(element)}]`;
    let shown = base;
    for (let n = 2; taken.has(shown); n += 1) shown = `${base} (${n})`;
    taken.add(shown);
    listNames.push(shown);
  }
  if (none) taken.add("(none)");
  if (map) taken.add("mapping");
  const unique = (title) => {
    const base = names.includes(title) || listNames.includes(title) || (none && title === "(none)")
      || (map && title === "mapping")
      ? `${title} (model)` : title;
    let shown = base;
    for (let n = 2; taken.has(shown); n += 1) shown = `${base} (${n})`;
    taken.add(shown);
    return shown;
  };
  field.branches = union.branches.map((branch, index) => {
    const title = unique(typeof branch.title === "string" && branch.title ? branch.title
      : branch.value !== undefined ? String(branch.value) : `branch ${index + 1}`);
    const shape = { ...branch.shape, fields: { ...branch.shape.fields } };
    if (field.tag) delete shape.fields[field.tag];
    const box = document.createElement("fieldset");
    box.dataset.path = field.path;
    box.dataset.branch = title;
    const fields = wl.shapeFields(shape, `${field.path}.${title}.`, depth + 1);
    for (const f of fields) box.append(f.label);
    select.append(new Option(title, String(index)));
    return { title, value: branch.value, fields, box };
  });
  const branchBox = (title) => {
    const box = document.createElement("fieldset");
    box.dataset.path = field.path;
    box.dataset.branch = title;
    select.append(new Option(title, String(field.branches.length)));
    return box;
  };
  const renumbers = [];
  listed.forEach((element, index) => {
    const title = listNames[index];
    const box = branchBox(title);
    const rows = { name: title, path: `${field.path}.${title}`, required: true };
    // the rows are named by the union's place (`slots[1][0]`), as their problems are
    rows.shown = () => (field.shown ? field.shown() : field.name);
    wl.listField(rows, element, depth + 1);
    box.append(rows.label);
    field.branches.push({ title, list: rows, fields: [], box });
    renumbers.push(() => rows.renumber());
  });
  if (map) {
    const box = branchBox("mapping");
    const rows = { name: "mapping", path: `${field.path}.mapping`, required: true };
    rows.shown = () => (field.shown ? field.shown() : field.name);
    wl.mapField(rows, map, depth + 1, mapKey);
    box.append(rows.label);
    field.branches.push({ title: "mapping", list: rows, fields: [], box });
    renumbers.push(() => rows.renumber());
  }
  if (renumbers.length) field.renumber = () => renumbers.forEach((renumber) => renumber());
  for (const name of names) {
    const box = branchBox(name);
    const leaf = { name, path: `${field.path}.${name}`, required: true };
    wl.leafField(leaf, literal ? kinds : [name], literal ? values : undefined);
    box.append(leaf.label);
    field.branches.push({ title: name, leaf, fields: [], box });
  }
  const show = () => field.branches.forEach((b, i) => { b.box.hidden = String(i) !== select.value; });
  select.addEventListener("change", show);
  show();
  field.select = select;
  const pick = wl.text("label", null, "field");
  pick.append(wl.text("span", "kind"), select);
  field.label.append(pick, ...field.branches.map((b) => b.box));
  return field;
};

// A list of models (or of a union of models): its items one fieldset each, an Add button
// that appends an empty one and a Remove button on each. A list of plain values (`list[int]`,
// `list[int | str]`, `list[Literal[...]]`) the same, each item one typed input (or choice).
wl.listField = (field, element, depth) => {
  field.kind = "list";
  field.rows = [];
  field.label = wl.box(field, field.name);
  const rows = document.createElement("div");
  const add = wl.text("button", "Add", "add");
  add.type = "button";
  add.disabled = wl.readOnly;
  let made = 0;
  // what the list is called on the page: its name, or, for a list that is an item of a list,
  // that list's name and its place in it now (`rows[1]`)
  field.shown = field.shown || (() => field.name);
  add.addEventListener("click", () => {
    const row = { name: String(made), path: `${field.path}.${made}`, required: true };
    row.shown = () => `${field.shown()}[${field.rows.indexOf(row)}]`;
    made += 1;
    const either = wl.either(element, depth) || wl.listsOf(element, depth);
    const mapped = wl.mapOf(element, depth);
    if (mapped && mapped.model) {
      const title = typeof mapped.model.title === "string" && mapped.model.title ? mapped.model.title : "model";
      wl.unionField(row, { branches: [{ title, shape: mapped.model }] }, depth, [], null, undefined, mapped.map, mapped.key);
    } else if (mapped) wl.mapField(row, mapped.map, depth + 1, mapped.key);
    else if (field.keyed && element.any === true) wl.leafField(row, [], undefined); // any JSON
    else if (wl.isShape(element.shape)) wl.modelField(row, element.shape, depth);
    else if (wl.isUnion(element.union)) wl.unionField(row, element.union, depth);
    else if (either) {
      // an item that may be several kinds of thing (`list[Model | int]`, `list[list[int] |
      // None]`): a choice of its kind, with "(none)" for null where the item may be null
      row.nullable = either.kinds.includes("null");
      const map = either.map || {};
      wl.unionField(row, either.union, depth, either.kinds, either.list || either.lists, either.values, map.map || null, map.key);
    }
    else if (!wl.plainKinds(element.kinds).length && depth < wl.MAX_DEPTH) {
      // a list of lists (`list[list[int]]`): each item a list of its own, with Add and Remove
      wl.listField(row, wl.dict(element.list), depth + 1);
    } else {
      // an item that may be null (`list[int | None]`) left empty is sent as null
      const kinds = wl.plainKinds(element.kinds);
      row.required = !kinds.includes("null");
      wl.leafField(row, kinds, element.values);
    }
    if (field.keyed) {
      // a mapping's entry: its key, then its value (whose own legend says `value`)
      const entry = wl.box(row, "");
      const key = wl.keyInput(field.keyShape);
      key.input.name = `${row.path}.key`;
      key.input.disabled = wl.readOnly;
      const pick = wl.text("label", null, "field");
      pick.append(wl.text("span", "key"), key.input);
      row.label.querySelector("legend, span").textContent = "value";
      entry.append(pick, row.label);
      row.label = entry;
      row.key = key;
    }
    row.label.classList.add("item");
    row.label.dataset.path = row.path;
    const remove = wl.text("button", "Remove", "remove");
    remove.type = "button";
    remove.disabled = wl.readOnly;
    remove.addEventListener("click", () => {
      field.rows.splice(field.rows.indexOf(row), 1);
      row.label.remove();
      renumber();
    });
    row.label.append(remove);
    field.rows.push(row);
    rows.append(row.label);
    renumber();
  });
  // an item's legend is its place in the list as it is now (`lines[1]`, `rows[1][0]`), as its
  // problems say
  const renumber = field.renumber = () => field.rows.forEach((row) => {
    row.label.querySelector("legend, span").textContent = row.shown();
    if (row.renumber) row.renumber();
  });
  field.label.append(rows, add);
  return field;
};

// Whether nothing was entered in these fields (a checkbox left clear counts as nothing, and so
// does a union whose chosen branch has nothing entered): an optional nested model left so is
// sent as absent, and takes its default on the server.
wl.fieldsEmpty = (fields) => fields.every((f) =>
  f.kind === "model" ? wl.fieldsEmpty(f.fields)
    : f.kind === "union" ? f.select.value === "" || wl.branchEmpty(f.branches[Number(f.select.value)])
      : f.kind === "list" || f.kind === "map" ? f.rows.length === 0
        : f.kind === "leaf" ? f.empty()
        : f.approval ? true : f.kind === "boolean" ? !f.input.checked : !f.input.value.trim());

wl.branchEmpty = (branch) => (branch.leaf ? branch.leaf.empty()
  : branch.list ? branch.list.rows.length === 0 : wl.fieldsEmpty(branch.fields));

// The payload the fields say, or the problems that keep it from being sent (each named by the
// field's path, `address.street: required`, `lines[1].sku: required`).
wl.collectFields = (fields, submitter, at) => {
  const payload = {}, problems = [];
  for (const field of fields) {
    const path = at + field.name;
    if (field.approval) {
      payload[field.name] = !submitter || submitter.value !== "reject";
      continue;
    }
    if (field.kind === "model") {
      if (!field.required && wl.fieldsEmpty(field.fields)) continue;
      const inner = wl.collectFields(field.fields, submitter, path + ".");
      problems.push(...inner.problems);
      payload[field.name] = inner.payload;
      continue;
    }
    if (field.kind === "union") {
      const chosen = wl.collectUnion(field, submitter, path);
      problems.push(...chosen.problems);
      if (chosen.present) payload[field.name] = chosen.value;
      continue;
    }
    if (field.kind === "list" || field.kind === "map") {
      if (!field.required && !field.rows.length) continue;
      payload[field.name] = wl.collectList(field, submitter, path, problems);
      continue;
    }
    // an optional field left empty is left out: it takes its default on the server
    const read = field.kind === "leaf" ? field.read(path)
      : wl.readInput(field.input, field.kind, field.required, path);
    if (read.problem) problems.push(read.problem);
    else if (read.present) payload[field.name] = read.value;
  }
  return { payload, problems };
};

// A list's items (each named by its place, `grid[1][0]`), its problems pushed to `problems`;
// a mapping's entries (each value named by its key, `stock.apple`) as an object.
wl.collectList = (field, submitter, path, problems) => (field.kind === "map"
  ? wl.collectMap(field, submitter, path, problems)
  : field.rows.map((row, index) => wl.collectRow(row, submitter, `${path}[${index}]`, problems)));

wl.collectMap = (field, submitter, path, problems) => {
  // no prototype: a key `__proto__` is an entry like any other, never the object's prototype
  const out = Object.create(null), seen = new Set();
  field.rows.forEach((row, index) => {
    const read = row.key.read(`${path}[${index}]`);
    const key = read.problem ? null : read.key;
    if (read.problem) problems.push(read.problem);
    else if (seen.has(key)) problems.push(`${path}[${index}]: key ${JSON.stringify(key)} given twice`);
    seen.add(key);
    const value = wl.collectRow(row, submitter, key !== null ? `${path}.${key}` : `${path}[${index}]`, problems);
    if (key !== null) out[key] = value;
  });
  return out;
};

// A mapping's key input, by what the shape says the key is (`key`: `{"kinds": [...]}`, with
// `values` for a Literal or an Enum): a text input for a string key (and for a key that may
// also be a string), a whole-number input for an integer key (`dict[int, str]`), a number
// input for a float key, and a choice of the values for a Literal or an Enum key (of `true`
// and `false` for a bool key). `read(where)` gives the key as JSON writes it (`"1"`, `"true"`:
// an object's keys are strings, which the class reads as its keys), or the problem. Two keys
// that the class reads as one (`1` and `01`) are one key here too, so the form refuses the
// second rather than send a payload whose first value the class would drop.
wl.keyInput = (shape) => {
  const kinds = wl.plainKinds(shape.kinds).filter((k) => k !== "null");
  const given = wl.keyValues(shape);
  const values = Array.isArray(given) ? given : kinds.length === 1 && kinds[0] === "boolean" ? [true, false] : null;
  const written = (v) => (typeof v === "string" ? v : JSON.stringify(v));
  if (values) {
    const select = document.createElement("select");
    select.className = "choice";
    select.append(new Option("(choose)", ""));
    values.forEach((v, i) => select.append(new Option(JSON.stringify(v), String(i))));
    return { input: select, read: (where) => (select.value === "" ? { problem: `${where}: key required` }
      : { key: written(values[Number(select.value)]) }) };
  }
  const number = kinds.length > 0 && kinds.every((k) => k === "integer" || k === "number");
  const kind = kinds.includes("number") ? "number" : "integer";
  const input = document.createElement("input");
  input.type = number ? "number" : "text";
  if (number) input.step = kind === "integer" ? "1" : "any";
  const read = (where) => {
    const raw = input.value;
    if (!raw.trim()) {
      // a number input holding what is no number reads as empty: say what it should be
      return { problem: number && input.validity.badInput ? `${where}: key expected ${kind}` : `${where}: key required` };
    }
    if (!number) {
      const broken = kinds.length === 1 && kinds[0] === "string" ? wl.keyRulesProblem(shape, raw) : null;
      return broken ? { problem: `${where}: ${broken}` } : { key: raw };
    }
    const whole = /^\s*([+-]?)(\d+)(?:\.0*)?\s*$/.exec(raw);
    if (kind === "integer" && whole) {
      // a whole number as its digits, at any size (a Number past 2^53 would be rounded): the
      // class reads a key of digits as the integer, and `07` and `7` are one key
      const digits = BigInt(whole[2]).toString();
      return { key: whole[1] === "-" && digits !== "0" ? `-${digits}` : digits };
    }
    const value = Number(raw.trim());
    if (!Number.isFinite(value) || (kind === "integer" && !Number.isInteger(value))) {
      return { problem: `${where}: key expected ${kind}` };
    }
    if (kind === "integer" && !Number.isSafeInteger(value)) {
      // written otherwise than in digits (`1e30`): its Number is rounded, so it is not sent
      return { problem: `${where}: key ${raw.trim()} is too large for the form (write it in digits)` };
    }
    return { key: String(value) };
  };
  return { input, read };
};

// The values a Literal's or an Enum's key may be, as the form offers them: those a JSON
// object's key can name (`takes`, recorded since the class takes no `"1"` for `Literal[1]`;
// every value in a shape recorded before), `"none"` where no value can be named, or null for
// a key that is no choice of values.
wl.keyValues = (shape) => {
  const given = wl.isChoice(shape.values) ? shape.values.filter((v) => v !== null) : [];
  if (!given.length) return null;
  if (!Array.isArray(shape.takes)) return given;
  const takes = shape.takes.filter((t) => t !== null && typeof t !== "object");
  const taken = given.filter((v) => takes.some((t) => t === v && typeof t === typeof v));
  return taken.length ? taken : "none";
};

// Why a string key breaks its recorded lengths (`minLength`, `maxLength`: counted in code
// points, as pydantic counts them) or its `pattern`, or null. A rule no writer makes (a length
// that is no whole number, or past a million) is left to the server, and so is a pattern the
// browser may not judge as pydantic's regex engine does, or not in bounded time
// (`wl.keyPattern`), and a key longer than `wl.MAX_KEY_MATCHED`.
wl.MOST_KEY_LENGTH = 1000000;
wl.MAX_KEY_MATCHED = 128;
wl.keyRulesProblem = (shape, key) => {
  const length = (n) => Number.isSafeInteger(n) && n >= 0 && n <= wl.MOST_KEY_LENGTH;
  const count = [...key].length;
  if (length(shape.minLength) && count < shape.minLength) return `key should have at least ${shape.minLength} characters`;
  if (length(shape.maxLength) && count > shape.maxLength) return `key should have at most ${shape.maxLength} characters`;
  const pattern = wl.keyPattern(shape.pattern);
  if (pattern && count <= wl.MAX_KEY_MATCHED && !pattern.test(key)) {
    return `key should match pattern ${JSON.stringify(shape.pattern)}`;
  }
  return null;
};

// A recorded key pattern as a JavaScript RegExp that takes exactly the keys pydantic's regex
// engine (Rust's `regex`, searched anywhere in the key) takes, or null, which leaves the
// pattern to the server. The pattern is read from the log, so it must never hang the page: a
// backtracking engine takes exponential time on a quantified group (`(a+)+$`) and polynomial
// time on many quantifiers, so only a pattern of at most `wl.MAX_KEY_PATTERN` characters, no
// quantified group and at most two quantifiers is judged here, against keys of at most
// `wl.MAX_KEY_MATCHED` characters. Escapes are taken from a short list, in Unicode mode
// (`\d` is any decimal digit, as in Rust: `wl.KEY_DIGITS`); any other (`\w`, `\b`, a
// backreference), a look-around, a flag group, Rust-only syntax, or a pattern JavaScript
// cannot compile is left to the server.
wl.MAX_KEY_PATTERN = 200;
wl.keyPatterns = new Map();
wl.keyPattern = (pattern) => {
  if (typeof pattern !== "string" || pattern.length > wl.MAX_KEY_PATTERN) return null;
  if (!wl.keyPatterns.has(pattern)) wl.keyPatterns.set(pattern, wl.translatedPattern(pattern));
  return wl.keyPatterns.get(pattern);
};
wl.PATTERN_ESCAPES = {
  s: "\\p{White_Space}", S: "\\P{White_Space}", n: "\\n", t: "\\t",
};
// What `\d` is in pydantic-core's engine (the 71 runs of decimal digits of its Unicode
// tables, 0-9 first), written out rather than as `\p{Nd}`: a browser's `\p{Nd}` is its own
// Unicode's, and Chromium 156's (Unicode 17) also takes the digits U+11DE0-11DE9, new there,
// so `^\D$` refused a key of one of them that the class takes. `\D` is `[^...]` of these;
// inside a class, `\d` is these and `\D` is left to the server.
wl.KEY_DIGITS = [
  "\\u{30}-\\u{39}\\u{660}-\\u{669}\\u{6F0}-\\u{6F9}\\u{7C0}-\\u{7C9}\\u{966}-\\u{96F}",
  "\\u{9E6}-\\u{9EF}\\u{A66}-\\u{A6F}\\u{AE6}-\\u{AEF}\\u{B66}-\\u{B6F}\\u{BE6}-\\u{BEF}",
  "\\u{C66}-\\u{C6F}\\u{CE6}-\\u{CEF}\\u{D66}-\\u{D6F}\\u{DE6}-\\u{DEF}\\u{E50}-\\u{E59}",
  "\\u{ED0}-\\u{ED9}\\u{F20}-\\u{F29}\\u{1040}-\\u{1049}\\u{1090}-\\u{1099}",
  "\\u{17E0}-\\u{17E9}\\u{1810}-\\u{1819}\\u{1946}-\\u{194F}\\u{19D0}-\\u{19D9}",
  "\\u{1A80}-\\u{1A89}\\u{1A90}-\\u{1A99}\\u{1B50}-\\u{1B59}\\u{1BB0}-\\u{1BB9}",
  "\\u{1C40}-\\u{1C49}\\u{1C50}-\\u{1C59}\\u{A620}-\\u{A629}\\u{A8D0}-\\u{A8D9}",
  "\\u{A900}-\\u{A909}\\u{A9D0}-\\u{A9D9}\\u{A9F0}-\\u{A9F9}\\u{AA50}-\\u{AA59}",
  "\\u{ABF0}-\\u{ABF9}\\u{FF10}-\\u{FF19}\\u{104A0}-\\u{104A9}\\u{10D30}-\\u{10D39}",
  "\\u{10D40}-\\u{10D49}\\u{11066}-\\u{1106F}\\u{110F0}-\\u{110F9}\\u{11136}-\\u{1113F}",
  "\\u{111D0}-\\u{111D9}\\u{112F0}-\\u{112F9}\\u{11450}-\\u{11459}\\u{114D0}-\\u{114D9}",
  "\\u{11650}-\\u{11659}\\u{116C0}-\\u{116C9}\\u{116D0}-\\u{116E3}\\u{11730}-\\u{11739}",
  "\\u{118E0}-\\u{118E9}\\u{11950}-\\u{11959}\\u{11BF0}-\\u{11BF9}\\u{11C50}-\\u{11C59}",
  "\\u{11D50}-\\u{11D59}\\u{11DA0}-\\u{11DA9}\\u{11F50}-\\u{11F59}\\u{16130}-\\u{16139}",
  "\\u{16A60}-\\u{16A69}\\u{16AC0}-\\u{16AC9}\\u{16B50}-\\u{16B59}\\u{16D70}-\\u{16D79}",
  "\\u{1CCF0}-\\u{1CCF9}\\u{1D7CE}-\\u{1D7FF}\\u{1E140}-\\u{1E149}\\u{1E2F0}-\\u{1E2F9}",
  "\\u{1E4F0}-\\u{1E4F9}\\u{1E5F1}-\\u{1E5FA}\\u{1E950}-\\u{1E959}\\u{1FBF0}-\\u{1FBF9}",
].join("");
wl.translatedPattern = (pattern) => {
  let out = "", inClass = false, quantifiers = 0, last = "";
  for (let i = 0; i < pattern.length; i += 1) {
    const c = pattern[i];
    if (c === "\\") {
      const next = pattern[i + 1];
      if (next === undefined) return null;
      i += 1;
      if (next === "d") out += inClass ? wl.KEY_DIGITS : `[${wl.KEY_DIGITS}]`;
      else if (next === "D" && !inClass) out += `[^${wl.KEY_DIGITS}]`;
      else if (Object.hasOwn(wl.PATTERN_ESCAPES, next)) out += wl.PATTERN_ESCAPES[next];
      else if ("^$\\.*+?()[]{}|/-".includes(next) && (next !== "-" || inClass)) out += `\\${next}`;
      else return null;
      last = "atom";
      continue;
    }
    if (inClass) {
      if (c === "[" || (c === "&" && pattern[i + 1] === "&") || (c === "~" && pattern[i + 1] === "~")
        || (c === "-" && pattern[i + 1] === "-")) return null; // Rust's nested and set classes
      if (c === "]") { inClass = false; last = "atom"; }
      out += c;
      continue;
    }
    if (c === "[") {
      inClass = true;
      out += c;
      if (pattern[i + 1] === "^") { out += "^"; i += 1; }
      if (pattern[i + 1] === "]") return null; // Rust's `[]a]`: a class holding `]`
      continue;
    }
    if ("*+?{".includes(c)) {
      if (last === "quantifier" && c === "?") { out += c; last = "lazy"; continue; } // lazy: same keys
      if (last === "group" || last === "" || last === "quantifier" || last === "lazy") return null;
      quantifiers += 1;
      if (quantifiers > 2) return null;
      if (c === "{") {
        const bound = /^\{(\d{1,4})(,(\d{0,4}))?\}/.exec(pattern.slice(i));
        if (!bound) return null;
        out += bound[0];
        i += bound[0].length - 1;
      } else out += c;
      last = "quantifier";
      continue;
    }
    if (c === "(") {
      if (pattern[i + 1] === "?") {
        if (pattern[i + 2] !== ":") return null; // a look-around, a flag or a named group
        out += "(?:";
        i += 2;
      } else out += c;
      last = "";
      continue;
    }
    if (c === ")") { out += c; last = "group"; continue; }
    if (c === "|") { out += c; last = ""; continue; }
    if (c === "^" || c === "$") { out += c; last = "anchor"; continue; }
    // Rust's `.` is any character but a newline; JavaScript's also leaves out \r, \u2028, \u2029
    out += c === "." ? "[^\\n]" : c;
    last = "atom";
  }
  if (inClass) return null;
  try {
    return new RegExp(out, "u");
  } catch {
    return null;
  }
};

wl.collectRow = (row, submitter, where, problems) => {
  if (row.kind === "leaf") {
    const read = row.read(where);
    if (read.problem) problems.push(read.problem);
    return read.present ? read.value : null;
  }
  if (row.kind === "union") {
    const chosen = wl.collectUnion(row, submitter, where);
    problems.push(...chosen.problems);
    return chosen.present ? chosen.value : null;
  }
  if (row.kind === "list" || row.kind === "map") return wl.collectList(row, submitter, where, problems);
  const inner = wl.collectFields(row.fields, submitter, where + ".");
  problems.push(...inner.problems);
  return inner.payload;
};

// The chosen branch's object (with the tag of a discriminated union), null for "none" on a
// field that may be null, absent for "none" on one that may be left out.
wl.collectUnion = (field, submitter, path) => {
  if (field.select.value === "") {
    if (field.required && !field.nullable) return { present: false, problems: [`${path}: required`] };
    return field.nullable && field.required ? { present: true, value: null, problems: [] }
      : { present: false, problems: [] };
  }
  const branch = field.branches[Number(field.select.value)];
  if (branch.list) {
    const problems = [];
    const value = wl.collectList(branch.list, submitter, path, problems);
    return { present: true, value, problems };
  }
  if (branch.leaf) {
    const read = branch.leaf.read(path);
    return read.problem ? { present: false, problems: [read.problem] }
      : { present: read.present, value: read.value, problems: [] };
  }
  const inner = wl.collectFields(branch.fields, submitter, path + ".");
  const value = field.tag && branch.value !== undefined
    ? { [field.tag]: branch.value, ...inner.payload } : inner.payload;
  return { present: true, value, problems: inner.problems };
};
