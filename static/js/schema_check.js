// A small JSON Schema check for edited arguments, run in the browser before a decision is sent.
//
// It covers what tool schemas use: type, required, properties, additionalProperties: false,
// enum, const, minimum/maximum, minLength/maxLength, pattern, items, minItems/maxItems. It is a
// courtesy that saves a round trip: the server checks the edit again with the full validator
// and its answer is what counts (and is shown when it refuses). Masked values are not checked.

function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value; // "string", "boolean", "object"
}

function fitsType(value, type) {
  const actual = typeOf(value);
  if (type === "number") return actual === "number" || actual === "integer";
  return actual === type;
}

function where(path) {
  return path.length ? path.join("/") : "(root)";
}

// A sensitive value stays masked in the edit box; the server puts the hidden value back and checks it.
const MASK = "••••";

function check(schema, value, path, errors) {
  if (!schema || typeof schema !== "object" || value === MASK) return;
  const at = where(path);
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => fitsType(value, t))) {
      errors.push(`${at}: must be ${types.join(" or ")}, not ${typeOf(value)}`);
      return; // the other rules assume the right type
    }
  }
  if (schema.enum !== undefined && !schema.enum.some((option) => JSON.stringify(option) === JSON.stringify(value))) {
    errors.push(`${at}: must be one of ${schema.enum.map((o) => JSON.stringify(o)).join(", ")}`);
  }
  if (schema.const !== undefined && JSON.stringify(schema.const) !== JSON.stringify(value)) {
    errors.push(`${at}: must be ${JSON.stringify(schema.const)}`);
  }
  const kind = typeOf(value);
  if (kind === "number" || kind === "integer") {
    if (schema.minimum !== undefined && value < schema.minimum) errors.push(`${at}: must be at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) errors.push(`${at}: must be at most ${schema.maximum}`);
  } else if (kind === "string") {
    const length = [...value].length; // characters, as the server counts them
    if (schema.minLength !== undefined && length < schema.minLength) {
      errors.push(`${at}: must have at least ${schema.minLength} characters`);
    }
    if (schema.maxLength !== undefined && length > schema.maxLength) {
      errors.push(`${at}: must have at most ${schema.maxLength} characters`);
    }
    if (schema.pattern !== undefined) {
      let pattern = null;
      try {
        pattern = new RegExp(schema.pattern, "u");
      } catch {
        pattern = null; // not JavaScript syntax: the server decides
      }
      if (pattern && !pattern.test(value)) errors.push(`${at}: must match ${schema.pattern}`);
    }
  } else if (kind === "array") {
    if (schema.minItems !== undefined && value.length < schema.minItems) errors.push(`${at}: needs at least ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) errors.push(`${at}: takes at most ${schema.maxItems} items`);
    if (schema.items && typeof schema.items === "object") {
      value.forEach((item, n) => check(schema.items, item, [...path, n], errors));
    }
  } else if (kind === "object") {
    const properties = schema.properties || {};
    for (const name of schema.required || []) {
      if (!Object.hasOwn(value, name)) errors.push(`${at}: "${name}" is required`);
    }
    for (const [name, item] of Object.entries(value)) {
      if (Object.hasOwn(properties, name)) check(properties[name], item, [...path, name], errors);
      else if (schema.additionalProperties === false) errors.push(`${at}: "${name}" is not allowed`);
      else if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
        check(schema.additionalProperties, item, [...path, name], errors);
      }
    }
  }
}

// The problems of `text` as arguments for `schema`: [] when it fits (as far as this check sees).
export function argumentErrors(schema, text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return [`not valid JSON: ${error.message}`];
  }
  const errors = [];
  check(schema, value, [], errors);
  return errors;
}
