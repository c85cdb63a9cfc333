import { test } from 'node:test'
import assert from 'node:assert/strict'
import { CommandExitError, NotFoundError, TimeoutError } from 'e2b'
import { newSandbox, waitFor } from './helpers.mjs'

test('commands', async (t) => {
  const sbx = await newSandbox(t)

  await t.test('run streams stdout and stderr to the callbacks and answers the exit code', async () => {
    const out = []
    const errs = []
    const r = await sbx.commands.run('echo one; echo two >&2; sleep 0.2; echo three', {
      onStdout: (d) => out.push(d),
      onStderr: (d) => errs.push(d),
    })
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'one\nthree\n')
    assert.equal(r.stderr, 'two\n')
    assert.equal(out.join(''), 'one\nthree\n')
    assert.equal(errs.join(''), 'two\n')
  })

  await t.test('envs and cwd reach the command; stdin is closed unless asked for', async () => {
    const r = await sbx.commands.run('echo "$GREETING"; pwd; cat', { envs: { GREETING: 'hello there' }, cwd: '/tmp' })
    assert.equal(r.stdout, 'hello there\n/tmp\n')
  })

  await t.test('commands run as E2B\'s user in its home, with sudo; user: root runs as root', async () => {
    const r = await sbx.commands.run('id -un; pwd; echo "$HOME"; sudo -n id -u')
    assert.equal(r.stdout, 'user\n/home/user\n/home/user\n0\n')
    const asRoot = await sbx.commands.run('id -un; pwd', { user: 'root' })
    assert.equal(asRoot.stdout, 'root\n/root\n')
    await assert.rejects(sbx.commands.run('true', { user: 'nobody-here' }), /invalid user/)
  })

  await t.test('a failing command raises CommandExitError with its output', async () => {
    await assert.rejects(sbx.commands.run('echo partial; echo broken >&2; exit 3'), (e) => {
      assert.ok(e instanceof CommandExitError, `got ${e}`)
      assert.equal(e.exitCode, 3)
      assert.equal(e.stdout, 'partial\n')
      assert.equal(e.stderr, 'broken\n')
      return true
    })
  })

  await t.test('background command: list, disconnect, connect, sendStdin', async () => {
    const h = await sbx.commands.run('echo started; read line; echo "got $line"', { background: true, stdin: true })
    assert.ok(h.pid > 0)
    const listed = await sbx.commands.list()
    const mine = listed.find((p) => p.pid === h.pid)
    assert.ok(mine, `pid ${h.pid} not in ${JSON.stringify(listed)}`)
    assert.equal(mine.cmd, '/bin/bash')
    assert.ok(mine.args.includes('echo started; read line; echo "got $line"'))
    await waitFor('the first line', 10_000, () => h.stdout === 'started\n')
    await h.disconnect()

    const again = await sbx.commands.connect(h.pid)
    await sbx.commands.sendStdin(h.pid, 'the answer\n')
    const r = await again.wait()
    assert.equal(r.exitCode, 0)
    assert.match(r.stdout, /got the answer\n$/)
    assert.ok(!(await sbx.commands.list()).some((p) => p.pid === h.pid))
  })

  await t.test('kill ends a background command and says false for one that is gone', async () => {
    const h = await sbx.commands.run('echo $$; sleep 600', { background: true })
    // The pid is the process's pid in the sandbox, as on E2B.
    await waitFor('the shell to print its pid', 10_000, () => h.stdout !== '')
    assert.equal(h.stdout, `${h.pid}\n`)
    await sbx.commands.run(`kill -0 ${h.pid}`)
    assert.equal(await sbx.commands.kill(h.pid), true)
    await assert.rejects(h.wait(), (e) => e instanceof CommandExitError && e.exitCode !== 0)
    assert.ok(!(await sbx.commands.list()).some((p) => p.pid === h.pid))
    assert.equal(await sbx.commands.kill(h.pid), false)
    await assert.rejects(sbx.commands.connect(h.pid), (e) => e instanceof NotFoundError)
    await assert.rejects(sbx.commands.run(`kill -0 ${h.pid}`), (e) => e instanceof CommandExitError)
  })

  await t.test('a command past its timeoutMs raises TimeoutError and is killed', async () => {
    await assert.rejects(sbx.commands.run('sleep 120 # timeout-probe', { timeoutMs: 1000 }), (e) => {
      assert.ok(e instanceof TimeoutError, `got ${e}`)
      return true
    })
    await waitFor('the timed-out command to be gone', 10_000, async () =>
      !(await sbx.commands.list()).some((p) => p.args.join(' ').includes('timeout-probe')))
  })

  await t.test('pty: create, sendInput, resize, kill', async () => {
    let seen = ''
    const dec = new TextDecoder()
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { seen += dec.decode(d, { stream: true }) } })
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo $((6 * 7))\n'))
    await waitFor('the shell to answer 42', 10_000, () => /^42\r?$/m.test(seen))
    await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size\n'))
    await waitFor('stty to print the new size', 10_000, () => seen.includes('30 100'))
    assert.equal(await sbx.pty.kill(term.pid), true)
    await assert.rejects(term.wait())
  })
})
