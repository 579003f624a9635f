// The worked example of docs/E2B.md: the Vercel AI SDK's usual code-execution
// tool, unchanged E2B code, running on warren (E2B_API_URL, E2B_SANDBOX_URL
// and E2B_API_KEY point at it). A mock model stands in for the LLM, so it runs
// offline: it asks for the tool once, then answers. example_test.go runs it.
import { generateText, tool, stepCountIs } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
import { Sandbox } from 'e2b'
import { z } from 'zod'

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } }
let calls = 0
// Stands in for an LLM: first it asks for the tool, then it answers.
const model = new MockLanguageModelV3({
  doGenerate: async () => (calls++ === 0
    ? { content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'runCode', input: JSON.stringify({ code: 'print(2**100)' }) }],
        finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] }
    : { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] }),
})

const sandbox = await Sandbox.create()
const runCode = tool({
  description: 'Run Python code in a sandbox',
  inputSchema: z.object({ code: z.string() }),
  execute: async ({ code }) => {
    await sandbox.files.write('/home/user/main.py', code)
    const r = await sandbox.commands.run('python3 /home/user/main.py')
    return { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode }
  },
})
const { steps } = await generateText({ model, tools: { runCode }, stopWhen: stepCountIs(2), prompt: 'What is 2**100? Use the sandbox.' })
console.log(JSON.stringify(steps[0].toolResults[0].output))
await sandbox.kill()
