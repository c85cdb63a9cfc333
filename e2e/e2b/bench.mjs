// The E2B SDK's side of cmd/e2bbench: the calls E2B's users time, through
// @e2b/code-interpreter (which is e2b's Sandbox plus runCode) against
// sandboxd. Prints one JSON line of samples in milliseconds. Not a test:
// node --test does not pick this file up.
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

const rounds = Number(process.env.E2B_BENCH_ROUNDS || 5)
const calls = Number(process.env.E2B_BENCH_CALLS || 100)
const now = () => performance.now()
const out = { tti: [], run_true: [], read_4k: [], run_code: [] }

// Sandbox.create until the first commands.run answered.
for (let i = 0; i < rounds; i++) {
  const t0 = now()
  const sbx = await Sandbox.create({ timeoutMs: 300_000 })
  const r = await sbx.commands.run('true')
  out.tti.push(now() - t0)
  assert.equal(r.exitCode, 0)
  await sbx.kill()
}

const sbx = await Sandbox.create({ timeoutMs: 600_000 })
try {
  const text = 'x'.repeat(4095) + '\n'
  await sbx.files.write('bench-4k.txt', text)
  // One untimed call of each warms what the first one starts.
  await sbx.commands.run('true')
  await sbx.files.read('bench-4k.txt')
  await sbx.runCode('1+1')
  for (let i = 0; i < calls; i++) {
    const t0 = now()
    const r = await sbx.commands.run('true')
    out.run_true.push(now() - t0)
    assert.equal(r.exitCode, 0)
  }
  for (let i = 0; i < calls; i++) {
    const t0 = now()
    const got = await sbx.files.read('bench-4k.txt')
    out.read_4k.push(now() - t0)
    assert.equal(got.length, 4096)
  }
  for (let i = 0; i < calls; i++) {
    const t0 = now()
    const ex = await sbx.runCode('1+1')
    out.run_code.push(now() - t0)
    assert.equal(ex.text, '2')
  }
} finally {
  await sbx.kill()
}
console.log(JSON.stringify(out))
