// Connects the TypeScript MCP SDK's client to a sandboxd run's MCP endpoint
// and prints one JSON line a Go test checks: the tool names and schemas it
// listed, and the results of the calls it made.
// Env: MCP_URL (the endpoint), MCP_TOKEN (a bearer token), MCP_PNG_CODE (an
// eval cell that displays a PNG).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.env.MCP_URL);
const transport = new StreamableHTTPClientTransport(url, {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
});
const client = new Client({ name: "sandboxd-e2e-ts", version: "1.0.0" });
const deadline = setTimeout(() => {
  console.error("client.mjs: no answer within 240s");
  process.exit(2);
}, 240_000);

try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const write = await client.callTool({ name: "write", arguments: { path: "ts.txt", content: "from typescript\n" } });
  const read = await client.callTool({ name: "read", arguments: { path: "ts.txt" } });
  const image = await client.callTool({
    name: "eval",
    arguments: { code: process.env.MCP_PNG_CODE, description: "a PNG from the TypeScript client" },
  });
  let unknown = "";
  try {
    await client.callTool({ name: "no_such_tool", arguments: {} });
  } catch (e) {
    unknown = `${e.code}: ${e.message}`;
  }
  const out = {
    protocolVersion: transport.protocolVersion ?? "",
    sessionId: transport.sessionId ?? "",
    server: client.getServerVersion(),
    tools: tools.map((t) => ({ name: t.name, inputSchema: t.inputSchema, readOnly: t.annotations?.readOnlyHint ?? null })),
    write,
    read,
    image,
    unknown,
  };
  await transport.terminateSession();
  await client.close();
  console.log(JSON.stringify(out));
  clearTimeout(deadline);
} catch (e) {
  console.error("client.mjs:", e?.stack ?? e);
  process.exit(1);
}
