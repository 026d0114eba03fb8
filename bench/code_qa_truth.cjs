// Ground truth for the code-QA bench (bench/code_qa.py) on TypeScript packages: the TypeScript
// compiler's own parser (ts.createSourceFile; no type checking).
//
// Usage: node code_qa_truth.cjs ROOT (with `typescript` on NODE_PATH). Prints one JSON object: every
// function, method, class, interface, type alias and enum declared in the .ts/.tsx/.mts/.cts files
// under ROOT (name, qualified name, kind, file, first and last line), every call site (the called
// name, file, line, and the declaration it sits in), and the names JavaScript's own objects carry
// (a call `x.push()` may be the package's `push` or an array's: the bench asks no question on them).
"use strict";
const fs = require("fs");
const path = require("path");
const ts = require("typescript");

const SOURCE = /\.(ts|tsx|mts|cts)$/;

function walk(dir, found) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full, found);
    else if (entry.isFile() && SOURCE.test(entry.name)) found.push(full);
  }
  return found;
}

function nameOf(node) {
  const name = node.name;
  if (!name) return null;
  if (ts.isIdentifier(name) || ts.isPrivateIdentifier(name) || ts.isStringLiteral(name)) return name.text;
  return null; // a computed name ([Symbol.iterator]) is not something one asks for by name
}

// the name a call names: f for f(), x.f(), x?.f(), new F() and f<T>()
function calledName(expr) {
  while (ts.isParenthesizedExpression(expr) || ts.isNonNullExpression(expr)) expr = expr.expression;
  if (ts.isIdentifier(expr)) return expr;
  if (ts.isPropertyAccessExpression(expr)) return expr.name;
  return null;
}

function isFunctionValue(node) {
  return node && (ts.isArrowFunction(node) || ts.isFunctionExpression(node));
}

// what a node declares, if it is a definition the bench counts: [name, kind]
function declared(node) {
  if (ts.isFunctionDeclaration(node)) return [nameOf(node), "function"];
  if (ts.isClassDeclaration(node)) return [nameOf(node), "class"];
  if (ts.isInterfaceDeclaration(node)) return [nameOf(node), "interface"];
  if (ts.isTypeAliasDeclaration(node)) return [nameOf(node), "type"];
  if (ts.isEnumDeclaration(node)) return [nameOf(node), "enum"];
  if (ts.isMethodDeclaration(node) || ts.isGetAccessorDeclaration(node) || ts.isSetAccessorDeclaration(node)) {
    return [nameOf(node), "method"];
  }
  if (ts.isConstructorDeclaration(node)) return ["constructor", "method"];
  // const f = () => ..., and a class's property holding a function: named functions too
  if ((ts.isVariableDeclaration(node) || ts.isPropertyDeclaration(node)) && isFunctionValue(node.initializer)) {
    return [nameOf(node), ts.isPropertyDeclaration(node) ? "method" : "function"];
  }
  return null;
}

// names JavaScript's globals and Node's built-in modules define (their functions' prototypes too)
function builtinNames() {
  const names = new Set();
  const add = (owner) => {
    for (const name of Object.getOwnPropertyNames(owner)) {
      names.add(name);
      let value;
      try {
        value = owner[name];
      } catch {
        continue; // a getter that refuses to be read out of context
      }
      if (typeof value === "function" && value.prototype) {
        for (const member of Object.getOwnPropertyNames(value.prototype)) names.add(member);
      }
    }
  };
  add(globalThis);
  for (const o of [Object, Array, String, Number, Promise, Map, Set, Date, RegExp, JSON, Math, Reflect, Function]) add(o);
  for (const name of require("module").builtinModules) {
    if (name.startsWith("_")) continue;
    try {
      add(require(name));
    } catch {
      continue; // a module this Node cannot load here
    }
  }
  return [...names].sort();
}

function main() {
  const root = path.resolve(process.argv[2]);
  const out = { parser: `typescript ${ts.version}`, definitions: [], calls: [], errors: [], builtins: builtinNames() };
  for (const full of walk(root, [])) {
    const file = path.relative(root, full).split(path.sep).join("/");
    const text = fs.readFileSync(full, "utf8");
    const kind = full.endsWith("x") ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
    const source = ts.createSourceFile(full, text, ts.ScriptTarget.Latest, true, kind);
    for (const d of source.parseDiagnostics || []) out.errors.push(`${file}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`);
    const line = (pos) => source.getLineAndCharacterOfPosition(pos).line + 1;
    // scopes: the enclosing named definitions (classes and interfaces qualify their members)
    const visit = (node, owners, caller) => {
      const what = declared(node);
      if (what && what[0]) {
        const [name, kind] = what;
        const owner = owners.length && kind === "method" ? owners[owners.length - 1] + "." : "";
        // a `const f = ...` spans its whole statement, from `export` to `;`
        const span = ts.isVariableDeclaration(node) && node.parent && node.parent.parent ? node.parent.parent : node;
        const first = line(span.getStart(source));
        out.definitions.push({ name, qualname: owner + name, kind, file, line: first, end_line: line(span.getEnd()) });
        if (kind === "class" || kind === "interface") owners = [...owners, name];
        else if (kind === "function" || kind === "method") caller = `${file}:${first}`;
      }
      if (ts.isCallExpression(node) || ts.isNewExpression(node)) {
        const name = calledName(node.expression);
        if (name) out.calls.push({ name: name.text, file, line: line(name.getStart(source)), caller });
      }
      ts.forEachChild(node, (child) => visit(child, owners, caller));
    };
    visit(source, [], null);
  }
  process.stdout.write(JSON.stringify(out));
}

main();
