// The code interpreter through E2B's own SDK (@e2b/code-interpreter), against
// a running sandboxd: runCode with a print, a result, a DataFrame, a
// matplotlib chart, an error, JavaScript, env vars, a timeout, and contexts.
// The harness of this folder starts the daemon and sets E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY; the SDK reads them itself. Its default
// template, code-interpreter-v1, must map to the sandbox image.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

let sbx

before(async () => {
  for (const v of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
    assert.ok(process.env[v], `${v} is not set; run these tests through the harness of e2e/e2b`)
  }
  sbx = await Sandbox.create({ timeoutMs: 10 * 60 * 1000 })
})

after(async () => {
  if (sbx) await sbx.kill()
})

test('a print comes back as stdout, live and in the logs', async () => {
  const seen = []
  const exec = await sbx.runCode('print("hello from e2b")', { onStdout: (m) => seen.push(m.line) })
  assert.deepEqual(exec.logs.stdout, ['hello from e2b\n'])
  assert.deepEqual(seen, ['hello from e2b\n'])
  assert.equal(exec.error, undefined)
  assert.ok(exec.executionCount >= 1)
})

test('the last expression is the main result', async () => {
  const exec = await sbx.runCode('x = 20\nx * 2 + 2')
  assert.equal(exec.text, '42')
  assert.equal(exec.results.length, 1)
  assert.equal(exec.results[0].isMainResult, true)
  assert.equal((await sbx.runCode('x')).text, '20', 'variables survive between cells')
})

test('a DataFrame comes back as HTML and data', async () => {
  const exec = await sbx.runCode("import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [4, 19]})")
  const r = exec.results[0]
  assert.match(r.html, /<table/)
  assert.match(r.html, /Oslo/)
  assert.deepEqual(r.data, { city: ['Oslo', 'Lima'], temp: [4, 19] })
  assert.ok(r.formats().includes('html'))
})

test('a matplotlib figure comes back as a PNG with its chart', async () => {
  const code = [
    'import matplotlib.pyplot as plt',
    "plt.bar(['a', 'b', 'c'], [3, 1, 2], label='count')",
    "plt.title('Letters')",
    'plt.show()',
  ].join('\n')
  const exec = await sbx.runCode(code)
  assert.equal(exec.error, undefined)
  const r = exec.results.find((x) => x.png)
  assert.ok(r, `no PNG result in ${JSON.stringify(exec.results.map((x) => x.formats()))}`)
  assert.equal(Buffer.from(r.png, 'base64').subarray(1, 4).toString(), 'PNG')
  assert.equal(r.chart.type, 'bar')
  assert.equal(r.chart.title, 'Letters')
  assert.deepEqual(r.chart.elements.map((e) => [e.label, e.value]), [['a', 3], ['b', 1], ['c', 2]])
})

test('an error is the execution error, not a thrown one', async () => {
  const errors = []
  const exec = await sbx.runCode("def f():\n    raise KeyError('missing')\nf()", { onError: (e) => errors.push(e) })
  assert.equal(exec.error.name, 'KeyError')
  assert.equal(exec.error.value, "'missing'")
  assert.match(exec.error.traceback, /raise KeyError/)
  assert.equal(errors.length, 1)
})

test('JavaScript runs in its own kernel', async () => {
  const exec = await sbx.runCode("console.log('node says hi'); 1 + 1", { language: 'javascript' })
  assert.deepEqual(exec.logs.stdout, ['node says hi\n'])
  assert.equal(exec.text, '2')
})

test('env vars hold for one cell', async () => {
  const code = "import os\nos.environ.get('GREETING', 'none')"
  assert.equal((await sbx.runCode(code, { envs: { GREETING: 'hej' } })).text, 'hej')
  assert.equal((await sbx.runCode(code)).text, 'none')
})

test('timeoutMs interrupts the cell and keeps the kernel', async () => {
  await sbx.runCode("kept = 'yes'")
  await assert.rejects(sbx.runCode('while True: pass', { timeoutMs: 2000 }), (e) => e.name === 'TimeoutError')
  assert.equal((await sbx.runCode('kept')).text, 'yes')
})

test('contexts keep their own variables, restart and go away', async () => {
  const ctx = await sbx.createCodeContext({ language: 'python', cwd: '/tmp' })
  assert.equal(ctx.language, 'python')
  assert.equal(ctx.cwd, '/tmp')
  await sbx.runCode('only_here = 1', { context: ctx })
  assert.equal((await sbx.runCode('import os; os.getcwd()', { context: ctx })).text, '/tmp')
  assert.equal((await sbx.runCode('only_here')).error.name, 'NameError', 'the default context does not see it')

  const ids = (await sbx.listCodeContexts()).map((c) => c.id)
  assert.ok(ids.includes(ctx.id), `${ctx.id} not in ${ids}`)

  await sbx.restartCodeContext(ctx)
  assert.equal((await sbx.runCode('only_here', { context: ctx })).error.name, 'NameError')

  await sbx.removeCodeContext(ctx.id)
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
  await assert.rejects(sbx.runCode('1', { context: ctx }), (e) => e.name === 'NotFoundError')
})

test('a cell works in E2B\'s home: a file it writes is the files API\'s by the same relative path', async () => {
  const exec = await sbx.runCode('import os\nopen("from_cell.csv", "w").write("a,b\\n1,2\\n")\nos.getcwd()')
  assert.equal(exec.error, undefined)
  assert.equal(exec.text, '/home/user')
  assert.equal(await sbx.files.read('from_cell.csv'), 'a,b\n1,2\n')
  await sbx.files.write('for_cell.txt', 'written through files')
  assert.equal((await sbx.runCode('open("for_cell.txt").read()')).text, 'written through files')
})
