// A second, independent MCP client: the TypeScript SDK's, configured by what `missions mcp` printed.
//
// Reads {"config": <missions mcp output>, "goal", "capability", "context", "answer"} on stdin; connects over
// streamable HTTP with the configured URL and headers, lists the tools, starts a mission, answers its
// question if it asks one, reads its result resource, and prints what it saw as one JSON document.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const server = Object.values(input.config.mcpServers)[0];

const transport = new StreamableHTTPClientTransport(new URL(server.url), {
  requestInit: { headers: server.headers ?? {} },
});
const client = new Client({ name: "missions-ts-check", version: "1.0.0" });
await client.connect(transport);
const seen = { server: client.getServerVersion(), progress: [] };
const onprogress = (p) => seen.progress.push(p.message ?? String(p.progress));
const options = { onprogress, timeout: 60000 };

seen.tools = (await client.listTools()).tools.map((tool) => tool.name);
const started = await client.callTool(
  { name: "start_mission", arguments: { goal: input.goal, capability: input.capability, context: input.context } },
  undefined,
  options,
);
seen.started = started.structuredContent;
let mission = started.structuredContent;
const question = (mission.pending_interrupts ?? [])[0];
if (question && input.answer) {
  const answered = await client.callTool(
    {
      name: "answer_question",
      arguments: { mission_id: mission.mission_id, interrupt_id: question.interrupt_id, text: input.answer },
    },
    undefined,
    options,
  );
  seen.answered = answered.structuredContent;
  mission = answered.structuredContent;
}
const result = await client.readResource({ uri: `mission://${mission.mission_id}/result` });
seen.result = JSON.parse(result.contents[0].text);
const refused = await client.callTool({ name: "get_mission", arguments: { mission_id: "m_not_yours" } });
seen.refused = { isError: refused.isError, text: refused.content[0].text };
await client.close();
process.stdout.write(JSON.stringify(seen));
