// Drives lovia's POST /api/agui with the official AG-UI client (@ag-ui/client HttpAgent).
// Usage: node client.mjs <url> <token|-> <scenario: text|approval|deny> <threadId>
// Prints one JSON line: every run's events as the client received them, the client's
// messages and state afterwards.
import { HttpAgent } from "@ag-ui/client";

const [url, token, scenario, threadId] = process.argv.slice(2);
const headers = token && token !== "-" ? { Authorization: `Bearer ${token}` } : {};
const agent = new HttpAgent({ url, headers, threadId });
const runs = [];

async function run(parameters) {
  const events = [];
  let error = null;
  try {
    await agent.runAgent(parameters, {
      onEvent: ({ event }) => {
        events.push(event);
      },
    });
  } catch (exc) {
    error = { message: String(exc?.message ?? exc), status: exc?.status ?? null };
  }
  runs.push({ events, error, pendingInterrupts: agent.pendingInterrupts ?? [] });
}

agent.addMessage({ id: "user-1", role: "user", content: "please deploy" });
await run({ runId: "agui-run-1" });
if (scenario === "approval" || scenario === "deny") {
  const resume = runs[0].pendingInterrupts.map((interrupt) => ({
    interruptId: interrupt.id,
    status: "resolved",
    payload: { approved: scenario === "approval" },
  }));
  await run({ runId: "agui-run-2", resume });
}
process.stdout.write(JSON.stringify({ runs, messages: agent.messages, state: agent.state }) + "\n");
