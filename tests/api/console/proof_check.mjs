// Runs the console's proof.js under Node on the cases read from stdin (a JSON list of
// {data, subtle?: "no-ed25519" | "none"}); prints one result per case as a JSON list.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [proofJs] = process.argv.slice(2);
await import(pathToFileURL(proofJs).href);
const { verifyProof } = globalThis.SealtrailProof;

// Web Crypto as a browser without Ed25519 has it: digests work, Ed25519 keys do not import.
const noEd25519 = {
  digest: (...a) => crypto.subtle.digest(...a),
  importKey: async () => { throw new DOMException("Ed25519 is not supported", "NotSupportedError"); },
  verify: async () => { throw new Error("verify must not be reached"); },
};

const cases = JSON.parse(readFileSync(0, "utf8"));
const out = [];
for (const c of cases) {
  const subtle = c.subtle === "no-ed25519" ? noEd25519 : crypto.subtle;
  out.push(await verifyProof(c.data, subtle));
}
process.stdout.write(JSON.stringify(out));
