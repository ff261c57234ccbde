/* sealtrail console: check a record's inclusion proof and signed checkpoint in the browser.
 *
 * Trusts no hash the server states: the leaf hash is SHA-256(0x00 || record bytes) computed
 * here, the root is recomputed along the RFC 9162 inclusion path (section 2.1.3.2), and the
 * C2SP checkpoint note must carry a valid Ed25519 signature by the pinned key (Web Crypto).
 * No dependency. Pure functions are exported as globalThis.SealtrailProof (Node tests use
 * them); the DOM is touched only when a document exists.
 */
(function () {
  "use strict";

  const DASH = "\u2014 ";
  const B64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

  class CheckError extends Error {}

  function b64decode(text, what) {
    if (typeof text !== "string" || !B64.test(text)) throw new CheckError(`${what} is not valid base64`);
    const bin = atob(text);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function b64encode(bytes) {
    let bin = "";
    for (const b of bytes) bin += String.fromCharCode(b);
    return btoa(bin);
  }

  function hex(bytes) {
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function concat(...parts) {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) { out.set(p, at); at += p.length; }
    return out;
  }

  function equal(a, b) {
    return a.length === b.length && a.every((x, i) => x === b[i]);
  }

  async function sha256(subtle, ...parts) {
    return new Uint8Array(await subtle.digest("SHA-256", concat(...parts)));
  }

  /** RFC 6962 leaf hash: SHA-256(0x00 || record bytes). */
  function leafHash(subtle, record) {
    return sha256(subtle, Uint8Array.of(0), record);
  }

  /** The root an RFC 9162 inclusion proof leads to (section 2.1.3.2); throws if malformed. */
  async function rootFromInclusion(subtle, index, size, leaf, path) {
    if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) {
      throw new CheckError(`leaf index ${index} is outside a tree of size ${size}`);
    }
    let fn = BigInt(index), sn = BigInt(size - 1), r = leaf;
    for (let i = 0; i < path.length; i++) {
      const p = path[i];
      if (p.length !== 32) throw new CheckError(`path hash ${i} is ${p.length} bytes, not 32`);
      if (sn === 0n) throw new CheckError(`the path has ${path.length} hashes, more than a tree of size ${size} needs`);
      if ((fn & 1n) === 1n || fn === sn) {
        r = await sha256(subtle, Uint8Array.of(1), p, r);
        if ((fn & 1n) === 0n) while (fn !== 0n && (fn & 1n) === 0n) { fn >>= 1n; sn >>= 1n; }
      } else {
        r = await sha256(subtle, Uint8Array.of(1), r, p);
      }
      fn >>= 1n; sn >>= 1n;
    }
    if (sn !== 0n) throw new CheckError(`the path has ${path.length} hashes, fewer than a tree of size ${size} needs`);
    return r;
  }

  /** C2SP vkey "name+keyid+base64(0x01 || key)", with the key id recomputed and checked. */
  async function parseVkey(subtle, vkey) {
    // name+keyid+key, split at the first two '+' only: base64 itself may hold '+'
    const m = typeof vkey === "string" ? /^([^+]+)\+([^+]*)\+(.*)$/s.exec(vkey.trim()) : null;
    if (!m) throw new CheckError("the ledger key is not name+keyid+key");
    const [, name, keyIdHex, b64] = m;
    const raw = b64decode(b64, "the ledger key");
    if (raw.length !== 33 || raw[0] !== 1) throw new CheckError("the ledger key is not an Ed25519 key");
    const pub = raw.slice(1);
    const keyId = (await sha256(subtle, new TextEncoder().encode(name + "\n"), Uint8Array.of(1), pub)).slice(0, 4);
    if (hex(keyId) !== keyIdHex) {
      throw new CheckError(`the key id ${keyIdHex} does not match the key (it hashes to ${hex(keyId)})`);
    }
    return { name, keyId, pub };
  }

  /** A C2SP signed note split into its signed text and its signature lines. */
  function parseNote(note) {
    if (typeof note !== "string") throw new CheckError("the checkpoint is missing");
    const split = note.lastIndexOf("\n\n");
    if (split < 0) throw new CheckError("the checkpoint has no blank line before its signatures");
    const text = note.slice(0, split + 1), block = note.slice(split + 2);
    if (!block.endsWith("\n")) throw new CheckError("the signature block does not end with a newline");
    const sigs = block.slice(0, -1).split("\n").map((line) => {
      if (!line.startsWith(DASH)) throw new CheckError(`signature line ${JSON.stringify(line)} does not start with an em dash`);
      const fields = line.slice(DASH.length).split(" ");
      if (fields.length !== 2 || !fields[0]) throw new CheckError(`signature line ${JSON.stringify(line)} is not "— name base64"`);
      const blob = b64decode(fields[1], `the signature of ${fields[0]}`);
      if (blob.length < 5) throw new CheckError(`the signature of ${fields[0]} is too short`);
      return { name: fields[0], keyId: blob.slice(0, 4), sig: blob.slice(4) };
    });
    return { text, sigs };
  }

  /** C2SP tlog-checkpoint body: origin, decimal size, base64 root, extension lines. */
  function parseCheckpoint(text) {
    const lines = text.slice(0, -1).split("\n");
    if (lines.length < 3) throw new CheckError("the checkpoint needs origin, size and root lines");
    const [origin, sizeText, rootText] = lines;
    if (!/^(0|[1-9][0-9]*)$/.test(sizeText)) throw new CheckError(`the checkpoint size ${JSON.stringify(sizeText)} is not a decimal number`);
    const root = b64decode(rootText, "the checkpoint root");
    if (root.length !== 32) throw new CheckError(`the checkpoint root is ${root.length} bytes, not 32`);
    return { origin, size: Number(sizeText), root };
  }

  async function ed25519Key(subtle, pub) {
    try {
      return await subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
    } catch (e) {
      if (e && (e.name === "NotSupportedError" || e.name === "TypeError" || e.name === "SyntaxError")) return null;
      throw e;
    }
  }

  /** Check a proof-data block; resolves to {state, summary, steps: [{check, ok, detail}]}.
   *  state: "verified" | "failed" | "unsupported" (no Web Crypto Ed25519: nothing is claimed). */
  async function verifyProof(data, subtle) {
    subtle = subtle || (globalThis.crypto && globalThis.crypto.subtle);
    const steps = [];
    const step = (check, ok, detail) => { steps.push({ check, ok, detail }); return ok; };
    const run = async (check, fn) => {
      try { return await fn(); } catch (e) {
        if (!(e instanceof CheckError)) throw e;
        step(check, false, e.message);
        return undefined;
      }
    };
    if (!subtle) {
      return { state: "unsupported", steps, summary: "Not checked: this browser has no Web Crypto (it needs a secure, https page)." };
    }
    const key = await run("ledger key", async () => {
      const k = await parseVkey(subtle, data.vkey);
      step("ledger key", true, `${k.name}+${hex(k.keyId)} (key id recomputed from the key)`);
      return k;
    });
    const note = await run("checkpoint", async () => parseNote(data.checkpoint));
    const cp = note && await run("checkpoint", async () => {
      const c = parseCheckpoint(note.text);
      const bad = [];
      if (c.size !== data.size) bad.push(`size mismatch: its size line says ${c.size}, the proof is for size ${data.size}`);
      if (key && c.origin !== key.name) bad.push(`origin mismatch: its origin ${JSON.stringify(c.origin)} is not the key's name ${JSON.stringify(key.name)}`);
      step("checkpoint", !bad.length, bad.length ? bad.join("; ") : `origin ${c.origin}, size ${c.size}`);
      return c;
    });
    let signed = false, unsupported = false;
    if (key && note) {
      await run("signature", async () => {
        const sig = note.sigs.find((s) => s.name === key.name && equal(s.keyId, key.keyId));
        if (!sig) {
          const by = note.sigs.map((s) => `${s.name}+${hex(s.keyId)}`).join(", ") || "nobody";
          throw new CheckError(`no signature by ${key.name}+${hex(key.keyId)} (signed by: ${by})`);
        }
        const k = await ed25519Key(subtle, key.pub);
        if (k === null) { unsupported = true; step("signature", false, "not checked: this browser's Web Crypto lacks Ed25519"); return; }
        signed = await subtle.verify("Ed25519", k, sig.sig, new TextEncoder().encode(note.text));
        step("signature", signed, signed ? `Ed25519 signature by ${key.name}+${hex(key.keyId)} holds` : "the Ed25519 signature does not verify over the checkpoint text");
      });
    }
    const leaf = await run("leaf hash", async () => {
      const l = await leafHash(subtle, b64decode(data.record_bytes, "the record bytes"));
      step("leaf hash", true, `SHA-256(0x00 || record bytes) = ${hex(l)}`);
      return l;
    });
    const record = await run("sealed fields", async () => {
      let env;
      try {
        env = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(b64decode(data.record_bytes, "the record bytes")));
      } catch (e) {
        if (e instanceof CheckError) throw e;
        throw new CheckError("the record bytes are not a JSON envelope");
      }
      const shown = data.shown || {};
      const bad = ["trace_id", "kind", "recorded_at"].filter((k) => env[k] !== shown[k])
        .map((k) => `the page shows ${k} ${JSON.stringify(shown[k])}, the sealed record says ${JSON.stringify(env[k])}`);
      step("sealed fields", !bad.length, bad.length ? bad.join("; ") : "the trace id, kind and time shown are the sealed record's");
      return env;
    });
    if (record) {
      await run("payload", async () => {
        const sealed = record.payload_sha256;
        if (data.payload == null) {
          const why = { withheld: "not shown to this role", purged: "purged (only its hash stays sealed)", none: "this record has none" }[data.payload_state];
          if (data.payload_state === "absent") throw new CheckError(`the record seals payload ${sealed}, but the ledger no longer holds it`);
          step("payload", true, why ? `${why}; nothing shown to check` : "nothing shown to check");
          return;
        }
        const got = hex(await sha256(subtle, b64decode(data.payload, "the payload")));
        if (got !== sealed) throw new CheckError(`payload mismatch: the message shown hashes to ${got}, the record seals ${sealed}`);
        step("payload", true, `the message shown hashes to the sealed ${got}`);
      });
    }
    const path = await run("inclusion path", async () => {
      if (!Array.isArray(data.hashes)) throw new CheckError("the proof has no path");
      return data.hashes.map((h, i) => b64decode(h, `path hash ${i}`));
    });
    const root = leaf && path && await run("inclusion path", async () => {
      const r = await rootFromInclusion(subtle, data.index, data.size, leaf, path);
      step("inclusion path", true, `${path.length} hashes lead from leaf ${data.index} to root ${hex(r)}`);
      return r;
    });
    if (root && cp) {
      step("root", equal(root, cp.root), equal(root, cp.root) ? "the recomputed root equals the checkpoint's root"
        : `root mismatch: the path leads to ${hex(root)}, the checkpoint signs ${hex(cp.root)}`);
    }
    const failed = steps.filter((s) => !s.ok && !(unsupported && s.check === "signature"));
    if (failed.length) {
      return { state: "failed", steps, summary: "Failed: " + failed.map((s) => `${s.check}: ${s.detail}`).join("; ") };
    }
    if (!unsupported && !signed) {
      return { state: "failed", steps, summary: "Failed: signature: the checkpoint signature was not checked" };
    }
    if (unsupported) {
      return { state: "unsupported", steps, summary: "Not verified: this browser's Web Crypto lacks Ed25519, so the checkpoint signature could not be checked (the hashes matched). Use a current browser or check the raw proof offline." };
    }
    return { state: "verified", steps,
             summary: `Verified: this record${data.payload != null ? " and the payment message shown" : ""} is leaf ${data.index} of the ${data.size}-entry tree whose head ${key.name}+${hex(key.keyId)} signed.` };
  }

  function show(doc, result) {
    const status = doc.getElementById("proof-status");
    const list = doc.getElementById("proof-steps");
    if (list) {
      list.replaceChildren(...result.steps.map((s) => {
        const li = doc.createElement("li");
        const badge = doc.createElement("span");
        const skipped = !s.ok && result.state === "unsupported";
        badge.className = "badge " + (s.ok ? "pass" : skipped ? "skip" : "fail");
        badge.textContent = s.ok ? "pass" : skipped ? "not checked" : "fail";
        const name = doc.createElement("strong");
        name.textContent = s.check;
        const why = doc.createElement("span");
        why.className = "why";
        why.textContent = " " + s.detail;
        li.append(badge, name, why);
        return li;
      }));
    }
    if (status) {
      status.dataset.state = result.state;
      status.className = "status " + ({ verified: "ok", failed: "fail", unsupported: "warn" }[result.state] || "pending");
      status.textContent = result.summary;
    }
  }

  async function main(doc) {
    const status = doc.getElementById("proof-status");
    const holder = doc.getElementById("proof-data");
    if (!status || !holder) return;
    status.textContent = "Checking the proof…";
    let result;
    try {
      result = await verifyProof(JSON.parse(holder.textContent));
    } catch (e) {
      result = { state: "failed", steps: [], summary: `Failed: the proof could not be checked: ${e && e.message ? e.message : e}` };
    }
    show(doc, result);
  }

  globalThis.SealtrailProof = { verifyProof, leafHash, rootFromInclusion, parseVkey, parseNote, parseCheckpoint, b64encode };
  if (typeof document !== "undefined") {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => main(document));
    else main(document);
  }
})();
