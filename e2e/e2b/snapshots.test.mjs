import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { newSandbox } from './helpers.mjs'

test('createSnapshot, listSnapshots, a sandbox from the snapshot, fork, deleteSnapshot', async (t) => {
  const sbx = await newSandbox(t)
  await sbx.files.write('state.txt', 'before the snapshot')
  const snap = await sbx.createSnapshot({ name: 'checkpoint' })
  assert.ok(snap.snapshotId)
  assert.deepEqual(snap.names, ['checkpoint'])
  t.after(() => Sandbox.deleteSnapshot(snap.snapshotId).catch(() => {}))
  await sbx.files.write('state.txt', 'after the snapshot')

  const listed = await sbx.listSnapshots().nextItems()
  assert.deepEqual(listed.map((s) => s.snapshotId), [snap.snapshotId])

  // A snapshot's id is a template.
  const restored = await Sandbox.create(snap.snapshotId, { timeoutMs: 600_000 })
  t.after(() => restored.kill().catch(() => {}))
  assert.equal(await restored.files.read('state.txt'), 'before the snapshot')

  const copies = await sbx.fork({ count: 2, timeoutMs: 600_000 })
  assert.equal(copies.length, 2)
  for (const c of copies) {
    assert.ok(!(c instanceof Error), `a fork failed: ${c}`)
    t.after(() => c.kill().catch(() => {}))
    assert.notEqual(c.sandboxId, sbx.sandboxId)
    assert.equal(await c.files.read('state.txt'), 'after the snapshot')
  }
  // A fork leaves no snapshot of its own behind, as on E2B.
  assert.deepEqual((await sbx.listSnapshots().nextItems()).map((s) => s.snapshotId), [snap.snapshotId])
  await copies[0].files.write('state.txt', 'changed in one copy')
  assert.equal(await sbx.files.read('state.txt'), 'after the snapshot')

  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
})

test('getMetrics answers the sandbox\'s resource use (one sample: Docker reports it)', async (t) => {
  const sbx = await newSandbox(t)
  const metrics = await sbx.getMetrics()
  assert.equal(metrics.length, 1)
  for (const m of metrics) {
    assert.ok(m.timestamp instanceof Date)
    assert.equal(typeof m.cpuUsedPct, 'number')
    assert.ok(m.memUsed > 0, `memUsed ${m.memUsed}`)
  }
  const hour = 3600_000
  assert.equal((await sbx.getMetrics({ start: new Date(Date.now() - hour), end: new Date(Date.now() + hour) })).length, 1)
  assert.deepEqual(await sbx.getMetrics({ start: new Date(Date.now() - 2 * hour), end: new Date(Date.now() - hour) }), [])
  assert.deepEqual(await sbx.getMetrics({ start: new Date(Date.now() + hour) }), [])
})
