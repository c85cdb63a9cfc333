import { test } from 'node:test'
import assert from 'node:assert/strict'
import { newSandbox, sandboxdURL } from './helpers.mjs'

// sandboxd's own view of a sandbox's network.
async function network(id) {
  const res = await fetch(`${sandboxdURL}/v1/sandboxes/${id}/network`, { headers: { Authorization: `Bearer ${process.env.E2B_API_KEY}` } })
  assert.equal(res.status, 200)
  return res.json()
}

const skip = !process.env.E2B_TEST_EGRESS && 'set E2B_TEST_EGRESS=1 for a sandboxd whose egress.allow names allowed.e2b.test and other.e2b.test'

test('allowOut makes a proxy sandbox with those rules; updateNetwork replaces them', { skip }, async (t) => {
  const sbx = await newSandbox(t, { network: { allowOut: ['allowed.e2b.test'] } })
  let n = await network(sbx.sandboxId)
  assert.equal(n.network, 'proxy')
  assert.deepEqual(n.allow, ['allowed.e2b.test'])
  await sbx.updateNetwork({ allowOut: ['other.e2b.test'], denyOut: ['allowed.e2b.test'] })
  n = await network(sbx.sandboxId)
  assert.deepEqual(n.allow, ['other.e2b.test'])
  assert.deepEqual(n.deny, ['allowed.e2b.test'])
  const info = await sbx.getInfo()
  assert.deepEqual(info.network.allowOut, ['other.e2b.test'])
  assert.deepEqual(info.network.denyOut, ['allowed.e2b.test'])
})

test('allowInternetAccess false is a sandbox with no network', async (t) => {
  const sbx = await newSandbox(t, { allowInternetAccess: false })
  assert.equal((await network(sbx.sandboxId)).network, 'none')
  assert.equal((await sbx.getInfo()).allowInternetAccess, false)
})
