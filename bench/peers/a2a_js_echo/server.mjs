// The benchmark echo agent on the official A2A JavaScript SDK (@a2a-js/sdk 1.3.0): bench/run.py's
// `a2a-js` target. It behaves like skillwire's examples/echo agent and bench/a2a_sdk_echo.py:
//
//   * `stream N`: a task goes WORKING, sends N chunks of one artifact (`chunk 0` .. `chunk N-1`, `append`
//     from the second, `lastChunk` on the last), then completes;
//   * any other text: a task completes at once with the text echoed back as one artifact, `echo`.
//
// One DefaultRequestHandler over an InMemoryTaskStore, served by express: the agent card, JSON-RPC on
// `POST /` and HTTP+JSON/REST under `/` (`POST /message:send`, `POST /message:stream`, ...), all A2A 1.0
// (requests must say `A2A-Version: 1.0`). With a gRPC port, the same handler is also served over gRPC
// (`lf.a2a.v1.A2AService`, @grpc/grpc-js), loaded only then.
//
//   node server.mjs --host 127.0.0.1 --port 8000 [--grpc-port 8001]
//
// BENCH_HOST, BENCH_PORT and BENCH_GRPC_PORT in the environment stand in for missing options.

import { parseArgs } from 'node:util';

import express from 'express';
import { AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import {
  agentCardHandler,
  jsonRpcHandler,
  restHandler,
  UserBuilder,
} from '@a2a-js/sdk/server/express';

const STREAM_COMMAND = /^\s*stream\s+(\d+)\s*$/;
const MAX_CHUNKS = 100_000;

function settings() {
  const { values } = parseArgs({
    options: {
      host: { type: 'string', default: process.env.BENCH_HOST || '127.0.0.1' },
      port: { type: 'string', default: process.env.BENCH_PORT || '8000' },
      'grpc-port': { type: 'string', default: process.env.BENCH_GRPC_PORT || '' },
    },
  });
  return {
    host: values.host,
    port: Number(values.port),
    grpcPort: values['grpc-port'] ? Number(values['grpc-port']) : undefined,
  };
}

function textPart(text) {
  return { content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' };
}

function userText(message) {
  return message.parts
    .filter((part) => part.content?.$case === 'text')
    .map((part) => part.content.value)
    .join('');
}

function status(taskId, contextId, state) {
  return AgentEvent.statusUpdate({
    taskId,
    contextId,
    status: { state, message: undefined, timestamp: new Date().toISOString() },
    metadata: undefined,
  });
}

function chunk(taskId, contextId, artifactId, name, text, append, lastChunk) {
  return AgentEvent.artifactUpdate({
    taskId,
    contextId,
    artifact: { artifactId, name, description: '', parts: [textPart(text)], metadata: undefined, extensions: [] },
    append,
    lastChunk,
    metadata: undefined,
  });
}

/** Echoes the user's text, or streams N chunks for `stream N`. */
class EchoExecutor {
  async execute(requestContext, eventBus) {
    const { taskId, contextId, userMessage } = requestContext;
    if (!requestContext.task) {
      eventBus.publish(
        AgentEvent.task({
          id: taskId,
          contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
          artifacts: [],
          history: [userMessage],
          metadata: undefined,
        }),
      );
    }
    const text = userText(userMessage);
    const command = STREAM_COMMAND.exec(text);
    if (command === null) {
      eventBus.publish(chunk(taskId, contextId, crypto.randomUUID(), 'echo', text, false, true));
      eventBus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED));
      return;
    }
    const count = Math.min(Number(command[1]), MAX_CHUNKS);
    eventBus.publish(status(taskId, contextId, TaskState.TASK_STATE_WORKING));
    const artifactId = `${taskId}-stream`;
    for (let i = 0; i < count; i++) {
      eventBus.publish(chunk(taskId, contextId, artifactId, 'stream', `chunk ${i}`, i > 0, i === count - 1));
    }
    eventBus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED));
  }

  async cancelTask(taskId, eventBus) {
    eventBus.publish(status(taskId, '', TaskState.TASK_STATE_CANCELED));
  }
}

function agentCard({ host, port, grpcPort }) {
  const iface = (protocolBinding, url) => ({ url, protocolBinding, tenant: '', protocolVersion: '1.0' });
  const interfaces = [iface('JSONRPC', `http://${host}:${port}/`), iface('HTTP+JSON', `http://${host}:${port}`)];
  if (grpcPort !== undefined) {
    interfaces.push(iface('GRPC', `${host}:${grpcPort}`));
  }
  return {
    name: 'Echo (a2a-js)',
    description: 'Benchmark echo agent built on the official A2A JavaScript SDK.',
    supportedInterfaces: interfaces,
    provider: undefined,
    version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [
      {
        id: 'echo',
        name: 'Echo',
        description: "Echoes the text back; 'stream N' streams N chunks.",
        tags: ['benchmark'],
        examples: ['hello', 'stream 10'],
        inputModes: [],
        outputModes: [],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

async function serveGrpc(requestHandler, host, grpcPort) {
  // Imported here: an HTTP-only start does not load gRPC, as bench/a2a_sdk_echo.py does not.
  const { Server, ServerCredentials } = await import('@grpc/grpc-js');
  const { A2AService, grpcService } = await import('@a2a-js/sdk/server/grpc');
  const server = new Server();
  server.addService(A2AService, grpcService({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  await new Promise((resolve, reject) => {
    server.bindAsync(`${host}:${grpcPort}`, ServerCredentials.createInsecure(), (error) =>
      error ? reject(error) : resolve(),
    );
  });
  return server;
}

async function main() {
  const config = settings();
  const requestHandler = new DefaultRequestHandler(agentCard(config), new InMemoryTaskStore(), new EchoExecutor());
  const grpcServer =
    config.grpcPort === undefined ? undefined : await serveGrpc(requestHandler, config.host, config.grpcPort);

  const app = express();
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
  app.use('/', jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  app.use('/', restHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  const http = app.listen(config.port, config.host, (error) => {
    if (error) {
      throw error;
    }
  });

  const stop = () => {
    grpcServer?.forceShutdown();
    http.close(() => process.exit(0));
    http.closeAllConnections();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

await main();
