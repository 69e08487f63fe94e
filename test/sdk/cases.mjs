// cases.mjs - what every SDK cross-check script shares: printing a case in
// run.sh's format, and the mutations each genuine delivery is tried with.

// Prints one case: body is a string or a Buffer (sent as base64).
export function emit({ name, scheme, secrets, body, headers, url = null, method = "POST",
                       at = null, tolerance = null, options = null, sdk_valid, verdict = null }) {
  const c = { name, scheme, secrets, body_b64: Buffer.from(body).toString("base64"), headers,
              url, method, at, tolerance, options, sdk_valid };
  if (verdict !== null) c.verdict = verdict;
  process.stdout.write(JSON.stringify(c) + "\n");
}

// The genuine delivery and mutations of it: a changed, truncated or extended
// body, each header dropped, emptied or with one character changed.
export function* mutations(body, headers) {
  const buf = Buffer.from(body);
  yield { name: "genuine", body: buf, headers };
  if (buf.length > 0) {
    const flipped = Buffer.from(buf);
    flipped[flipped.length >> 1] ^= 0x01;
    yield { name: "body bit flipped", body: flipped, headers };
    yield { name: "body truncated", body: buf.subarray(0, buf.length - 1), headers };
  }
  yield { name: "body extended", body: Buffer.concat([buf, Buffer.from(" ")]), headers };
  for (const h of Object.keys(headers)) {
    const { [h]: _, ...rest } = headers;
    yield { name: `${h} dropped`, body: buf, headers: rest };
    yield { name: `${h} empty`, body: buf, headers: { ...headers, [h]: "" } };
    const v = String(headers[h]);
    if (v.length > 0) {
      const i = v.length - 1;
      const c = v[i] === "A" ? "B" : "A";
      yield { name: `${h} last char changed`, body: buf, headers: { ...headers, [h]: v.slice(0, i) + c } };
    }
  }
}
