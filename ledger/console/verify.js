// Inclusion proofs checked in the browser: Web Crypto SHA-256 and Ed25519 only.
// Formats: docs/format-checkpoint.md (ledger-inclusion-proof/1, ledger-inclusion-path/1,
// C2SP signed notes) and docs/format.md (envelope, entry and payload hashes).
// Every check is reported in order; the first failure stops the walk and says which.

const enc = new TextEncoder();
const ENVELOPE_TAG = enc.encode("ledger.envelope.v1\0");
const ENTRY_TAG = enc.encode("ledger.entry.v1\0");
const PAYLOAD_TAG = enc.encode("ledger.payload.v2\0");
// An entry of a tenant other than "default" (ledger/core/tenant.py): its bundle entry
// carries "tenant" and "tseq", and its hash is the tenant link, which binds both.
const TENANT_ENTRY_TAG = enc.encode("ledger.entry.tenant.v1\0");
const TENANT_RE = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const MAX_U63 = (1n << 63n) - 1n;

export class ProofFailure extends Error {
  constructor(code, message) { super(message); this.code = code; }
}

function fail(code, message) { throw new ProofFailure(code, message); }

export function concat(...parts) {
  const n = parts.reduce((a, p) => a + p.length, 0);
  const out = new Uint8Array(n);
  let i = 0;
  for (const p of parts) { out.set(p, i); i += p.length; }
  return out;
}

export async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

export function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function fromHex(text, what) {
  if (typeof text !== "string" || !/^[0-9a-f]{64}$/.test(text)) {
    fail("proof_malformed", `${what} is not 64 lowercase hex digits`);
  }
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function sha256Field(text, what) {
  if (typeof text !== "string" || !text.startsWith("sha256:")) {
    fail("proof_malformed", `${what} is not 'sha256:' + 64 hex digits`);
  }
  return fromHex(text.slice(7), what);
}

export function b64decode(text, what) {
  let bin;
  try { bin = atob(text); } catch (e) { fail("proof_malformed", `${what} is not base64`); }
  const out = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  if (btoa(bin) !== text) fail("proof_malformed", `${what} is not canonical base64`);
  return out;
}

function b64urlDecode(text) {
  const pad = "=".repeat((4 - (text.length % 4)) % 4);
  const bin = atob(text.replace(/-/g, "+").replace(/_/g, "/") + pad);
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function u64be(n) {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n));
  return b;
}

// The entry hash a bundle's entry must have: the v1 link, or for another tenant's entry
// SHA-256(TENANT_ENTRY_TAG || prev || u64be(seq) || u64be(tseq) || u64be(recorded_at_us) ||
// u8(len(tenant)) || ascii(tenant) || body_hash).
export async function entryLink(e, seq, prev, body) {
  const has = ["tenant", "tseq"].filter((k) => Object.prototype.hasOwnProperty.call(e, k));
  if (!has.length) return sha256(concat(ENTRY_TAG, prev, u64be(seq), u64be(e.recorded_at_us), body));
  if (has.length !== 2) fail("proof_malformed", "the entry has one of tenant and tseq without the other");
  if (typeof e.tenant !== "string" || !TENANT_RE.test(e.tenant) || e.tenant === "default") {
    fail("proof_malformed", "entry.tenant is not the id of a tenant other than 'default'");
  }
  if (!Number.isSafeInteger(e.tseq) || e.tseq < 0) fail("proof_malformed", "entry.tseq is not a non-negative integer");
  if ([seq, e.tseq, e.recorded_at_us].some((n) => n < 0 || BigInt(n) > MAX_U63)) return new Uint8Array(0);
  const t = enc.encode(e.tenant);
  return sha256(concat(TENANT_ENTRY_TAG, prev, u64be(seq), u64be(e.tseq), u64be(e.recorded_at_us),
    Uint8Array.of(t.length), t, body));
}

function equal(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const nodeHash = (l, r) => sha256(concat(Uint8Array.of(1), l, r));
export const leafHash = (entryHash) => sha256(concat(Uint8Array.of(0), entryHash));

// RFC 9162 section 2.1.3.2: the root that `path` gives for leaf `index` of `size`.
export async function rootFromInclusion(index, size, leaf, path) {
  if (!(index < size)) fail("inclusion_invalid", `leaf index ${index} is not below tree size ${size}`);
  let fn = index, sn = size - 1, r = leaf;
  for (const p of path) {
    if (sn === 0) fail("inclusion_invalid", "the audit path is longer than the tree is deep");
    if (fn % 2 === 1 || fn === sn) {
      r = await nodeHash(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
      }
    } else {
      r = await nodeHash(r, p);
    }
    fn = Math.floor(fn / 2); sn = Math.floor(sn / 2);
  }
  if (sn !== 0) fail("inclusion_invalid", "the audit path is shorter than the tree is deep");
  return r;
}

// C2SP signed note: text up to the last blank line, then "— name base64(keyid||sig)" lines.
export function parseNote(note) {
  if (typeof note !== "string") fail("checkpoint_malformed", "the checkpoint is not text");
  const cut = note.lastIndexOf("\n\n");
  if (cut < 0 || !note.endsWith("\n")) fail("checkpoint_malformed", "the checkpoint has no signature block");
  const text = note.slice(0, cut + 1);
  const sigs = [];
  for (const line of note.slice(cut + 2, -1).split("\n")) {
    const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/.exec(line);
    if (!m) fail("checkpoint_malformed", "a signature line is malformed");
    const raw = b64decode(m[2], "a signature");
    if (raw.length < 5) fail("checkpoint_malformed", "a signature line is too short");
    sigs.push({ name: m[1], keyId: raw.slice(0, 4), sig: raw.slice(4) });
  }
  const lines = text.split("\n");
  if (lines.length < 4) fail("checkpoint_malformed", "the checkpoint text has fewer than three lines");
  const [origin, sizeText, rootText] = lines;
  if (!origin || !/^(0|[1-9][0-9]*)$/.test(sizeText)) fail("checkpoint_malformed", "bad origin or size line");
  const root = b64decode(rootText, "the root hash");
  if (root.length !== 32) fail("checkpoint_malformed", "the root hash is not 32 bytes");
  return { text, origin, size: Number(sizeText), root, sigs };
}

// The Ed25519 keys of a JWKS as {name, keyId, key} (key ID per C2SP signed-note).
export async function noteKeys(jwks, defaultName) {
  const out = [];
  for (const jwk of (jwks && jwks.keys) || []) {
    if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || typeof jwk.x !== "string") continue;
    const name = jwk.key_name || defaultName;
    const pub = b64urlDecode(jwk.x);
    const keyId = (await sha256(concat(enc.encode(name), Uint8Array.of(0x0a, 0x01), pub))).slice(0, 4);
    const key = await crypto.subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
    out.push({ name, keyId, key });
  }
  return out;
}

// Verified signer names; a known key whose signature fails rejects the note.
export async function verifyNote(parsed, keys) {
  const signers = [];
  for (const s of parsed.sigs) {
    const k = keys.find((k) => k.name === s.name && equal(k.keyId, s.keyId));
    if (!k) continue;  // a witness cosignature or an unknown key: ignored
    const ok = s.sig.length === 64 &&
      await crypto.subtle.verify({ name: "Ed25519" }, k.key, s.sig, enc.encode(parsed.text));
    if (!ok) fail("checkpoint_signature_invalid", `the signature by ${s.name} does not verify`);
    signers.push(s.name);
  }
  if (!signers.length) fail("checkpoint_signature_invalid", "no signature by a key of the ledger's JWKS");
  return signers;
}

// Walk the bundle; `steps` receives {check, ok, detail} for every check made.
export async function verifyProof(bundle, jwks) {
  const steps = [];
  const step = (check, detail) => steps.push({ check, ok: true, detail });
  try {
    if (!bundle || typeof bundle !== "object") fail("proof_malformed", "the proof is not an object");
    const full = bundle.format === "ledger-inclusion-proof/1";
    if (!full && bundle.format !== "ledger-inclusion-path/1") {
      fail("proof_format_unknown", `unknown proof format ${JSON.stringify(bundle.format)}`);
    }
    for (const k of ["seq", "tree_size", "leaf_index"]) {
      if (!Number.isSafeInteger(bundle[k]) || bundle[k] < 0) fail("proof_malformed", `${k} is not a non-negative integer`);
    }
    step("format", bundle.format);
    let entryHash;
    if (full) {
      const e = bundle.entry || {};
      let env;
      try { env = JSON.parse(e.envelope); } catch (x) { fail("envelope_malformed", "the envelope is not JSON"); }
      if (!env || typeof env !== "object" || Array.isArray(env)) fail("envelope_malformed", "the envelope is not a JSON object");
      if (env.ledger !== bundle.ledger_id) fail("ledger_id_mismatch", `the envelope is not for ledger ${bundle.ledger_id}`);
      step("envelope", "a JSON object for this ledger");
      const committed = Object.entries(env.payloads || {}).filter(([, d]) => d !== null);
      const sent = e.payloads || {};
      const same = committed.length === Object.keys(sent).length &&
        committed.every(([n, d]) => sent[n] && sent[n].digest === d);
      if (!same) fail("payload_set_mismatch", "the payload digests differ from those the envelope commits to");
      const withheld = [];
      for (const [name, p] of Object.entries(sent)) {
        if (p.data_b64 === null || p.data_b64 === undefined) { withheld.push(name); continue; }
        const raw = b64decode(p.data_b64, `payload ${name}`);
        let got;
        if (env.v === 2 && env.kind === "result") {
          const salt = typeof p.salt_b64 === "string" ? b64decode(p.salt_b64, `salt of ${name}`) : null;
          got = salt && salt.length === 32 ? "sha256:" + hex(await sha256(concat(PAYLOAD_TAG, salt, raw))) : null;
        } else {
          got = "sha256:" + hex(await sha256(raw));
        }
        if (got !== p.digest) fail("payload_digest_mismatch", `payload ${name} bytes do not hash to its digest`);
      }
      step("payloads", `${Object.keys(sent).length - withheld.length} digest(s) recomputed` +
        (withheld.length ? `, ${withheld.length} without bytes (erased or withheld)` : ""));
      const body = sha256Field(e.body_hash, "body_hash");
      if (!equal(await sha256(concat(ENVELOPE_TAG, enc.encode(e.envelope))), body)) {
        fail("body_hash_mismatch", "the envelope does not hash to body_hash");
      }
      step("body_hash", "SHA-256 of the envelope");
      if (bundle.leaf_index !== bundle.seq) fail("leaf_index_mismatch", `leaf_index ${bundle.leaf_index} is not seq ${bundle.seq}`);
      const prev = sha256Field(e.prev_hash, "prev_hash");
      entryHash = sha256Field(e.entry_hash, "entry_hash");
      if (!Number.isSafeInteger(e.recorded_at_us)) fail("proof_malformed", "recorded_at_us is not an integer");
      const link = await entryLink(e, bundle.seq, prev, body);
      const tenant = e.tenant === undefined ? "" : `tenant ${e.tenant}, tseq ${e.tseq}, `;
      if (!equal(link, entryHash)) fail("entry_hash_mismatch", `${tenant}prev_hash, seq, recorded_at_us and body_hash do not hash to entry_hash`);
      step("entry_hash", `recomputed from ${tenant}prev_hash, seq, time and body_hash`);
    } else {
      if (bundle.leaf_index !== bundle.seq) fail("leaf_index_mismatch", `leaf_index ${bundle.leaf_index} is not seq ${bundle.seq}`);
      entryHash = sha256Field(bundle.entry_hash, "entry_hash");
      step("entry_hash", "taken from the proof (your layer has no envelope to recompute it)");
    }
    const note = parseNote(bundle.checkpoint);
    const keys = await noteKeys(jwks, note.origin);
    const signers = await verifyNote(note, keys);
    step("checkpoint_signature", `Ed25519 signature by ${signers.join(", ")}`);
    if (note.origin !== bundle.origin) fail("origin_mismatch", `the checkpoint is for ${note.origin}, the proof for ${bundle.origin}`);
    if (note.size !== bundle.tree_size) fail("tree_size_mismatch", `tree_size ${bundle.tree_size} is not the checkpoint's size ${note.size}`);
    step("checkpoint", `origin ${note.origin}, tree size ${note.size}`);
    if (!Array.isArray(bundle.inclusion_path)) fail("proof_malformed", "inclusion_path is not a list");
    const path = bundle.inclusion_path.map((h, i) => fromHex(h, `inclusion_path[${i}]`));
    const root = await rootFromInclusion(bundle.leaf_index, bundle.tree_size, await leafHash(entryHash), path);
    if (!equal(root, note.root)) fail("inclusion_invalid", "the audit path does not lead to the checkpoint's root");
    step("inclusion", `${path.length} path hash(es) lead to the signed root`);
    return { ok: true, steps, signers, treeSize: note.size };
  } catch (e) {
    if (!(e instanceof ProofFailure)) {
      steps.push({ check: "error", ok: false, code: "verifier_error", detail: String(e && e.message || e) });
      return { ok: false, steps, code: "verifier_error", message: String(e && e.message || e) };
    }
    steps.push({ check: e.code, ok: false, code: e.code, detail: e.message });
    return { ok: false, steps, code: e.code, message: e.message };
  }
}

// RFC 9162 section 2.1.4.2: does `path` prove that the tree of `size1` with root `root1`
// is a prefix of the tree of `size2` with root `root2`?  Fails with consistency_invalid.
export async function verifyConsistency(size1, size2, root1, root2, path) {
  if (!(Number.isSafeInteger(size1) && Number.isSafeInteger(size2) && 0 < size1 && size1 <= size2)) {
    fail("consistency_invalid", `sizes ${size1} -> ${size2} are not 0 < old <= new`);
  }
  if (size1 === size2) {
    if (path.length) fail("consistency_invalid", "a proof between equal sizes must be empty");
    if (!equal(root1, root2)) fail("consistency_invalid", "two roots for one tree size: a fork");
    return;
  }
  const p = path.slice();
  const s1 = BigInt(size1);
  if ((s1 & (s1 - 1n)) === 0n) p.unshift(root1);  // an exact power of two
  if (!p.length) fail("consistency_invalid", "the consistency proof is empty");
  let fn = BigInt(size1 - 1), sn = BigInt(size2 - 1);
  while (fn & 1n) { fn >>= 1n; sn >>= 1n; }
  let fr = p[0], sr = p[0];
  for (const c of p.slice(1)) {
    if (sn === 0n) fail("consistency_invalid", "the consistency proof is longer than the tree is deep");
    if ((fn & 1n) || fn === sn) {
      fr = await nodeHash(c, fr);
      sr = await nodeHash(c, sr);
      if (!(fn & 1n)) { while (!(fn & 1n) && fn !== 0n) { fn >>= 1n; sn >>= 1n; } }
    } else {
      sr = await nodeHash(sr, c);
    }
    fn >>= 1n; sn >>= 1n;
  }
  if (sn !== 0n) fail("consistency_invalid", "the consistency proof is shorter than the tree is deep");
  if (!equal(fr, root1)) fail("consistency_invalid", `the proof does not lead to the signed root of size ${size1}: the two checkpoints are not one history (a fork)`);
  if (!equal(sr, root2)) fail("consistency_invalid", `the proof does not lead to the signed root of size ${size2}: the two checkpoints are not one history (a fork)`);
}

// One checkpoint against the one before it, both notes verified with the ledger's JWKS:
// {ok, code, message}.  `proof` is {from, path: [hex]} from GET /v1/checkpoints.
export async function verifyCheckpointPair(prevNote, note, proof, jwks, origin) {
  try {
    const keys = await noteKeys(jwks, origin);
    const a = parseNote(prevNote), b = parseNote(note);
    await verifyNote(a, keys);
    await verifyNote(b, keys);
    if (a.origin !== b.origin) fail("origin_mismatch", "the two checkpoints are of different origins");
    if (!proof || !Array.isArray(proof.path)) fail("consistency_invalid", proof && proof.error ? `the server has no proof: ${proof.error}` : "the server sent no consistency proof");
    if (proof.from !== a.size) fail("consistency_invalid", `the proof starts at size ${proof.from}, not ${a.size}`);
    const path = proof.path.map((x, i) => fromHex(x, `consistency path hash ${i}`));
    await verifyConsistency(a.size, b.size, a.root, b.root, path);
    return { ok: true, code: null, message: `consistent with the checkpoint of size ${a.size}: both signatures and the RFC 9162 consistency proof verified in your browser` };
  } catch (e) {
    if (e instanceof ProofFailure) return { ok: false, code: e.code, message: e.message };
    throw e;
  }
}
