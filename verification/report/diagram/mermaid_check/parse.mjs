// Parse Mermaid text with the real Mermaid parser (the one GitHub runs) and print
// what it read as JSON: the diagram type and, for a state diagram, every transition
// (source, target, label) and every state's description lines.
//   node parse.mjs < diagram.mmd         one document: exit 1 with the parser's message
//   node parse.mjs --many < texts.json   a JSON list of documents: a JSON list of
//                                         results, {"error": message} for a rejected one
// Mermaid's sanitizer needs a DOM; jsdom provides one.
import { JSDOM } from "jsdom";

const dom = new JSDOM("");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import("mermaid");

async function read(text) {
  const parsed = await mermaid.parse(text);
  const diagram = await mermaid.mermaidAPI.getDiagramFromText(text);
  const db = diagram.db;
  const relations = db.getRelations ? db.getRelations() : [];
  const states = db.getStates ? db.getStates() : new Map();
  const descriptions = {};
  for (const [id, state] of states instanceof Map ? states : Object.entries(states)) {
    descriptions[id] = state.descriptions ?? [];
  }
  return {
    diagramType: parsed.diagramType,
    transitions: relations.map((r) => [r.id1, r.id2, r.relationTitle ?? ""]),
    descriptions,
  };
}

function message(error) {
  return String(error.message || error).split("\n").slice(0, 4).join(" | ");
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = Buffer.concat(chunks).toString("utf8");
if (process.argv.includes("--many")) {
  const results = [];
  for (const text of JSON.parse(input)) {
    try {
      results.push(await read(text));
    } catch (error) {
      results.push({ error: message(error) });
    }
  }
  process.stdout.write(JSON.stringify(results) + "\n");
} else {
  try {
    process.stdout.write(JSON.stringify(await read(input)) + "\n");
  } catch (error) {
    process.stderr.write(message(error) + "\n");
    process.exit(1);
  }
}
