// What close() leaves behind: the dialling side still delivers every message it admitted, and a
// WebSocket client waiting to reconnect keeps no timer alive afterwards.
import { createHook } from 'node:async_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createMessenger } from '../../src/messenger/messenger.ts';
import type { Messenger } from '../../src/messenger/types.ts';
import { createMemoryNetwork, memoryTransport } from '../../src/adapters/memory.ts';
import { tcpTransport } from '../../src/adapters/node-tcp.ts';
import { webSocketClientTransport } from '../../src/adapters/websocket.ts';
import { webSocketServerTransport } from '../../src/adapters/ws-server.ts';
import { nextGone, within } from './helpers.ts';
import { waitFor } from '../support/wait-for.ts';
import { messengerFixture } from './raw-peer.ts';

const { open } = messengerFixture(afterEach);

describe('close() of the dialling side', () => {
  for (const kind of ['tcp', 'memory'] as const) {
    it(`delivers every message admitted on lane 0 before close() (${kind})`, async () => {
      const network = createMemoryNetwork();
      const node = async (listen: boolean): Promise<Messenger> => {
        const transports =
          kind === 'tcp'
            ? [tcpTransport({ listen, closeGraceMs: 2_000 })]
            : [memoryTransport({ network, listen, admissionLimit: 64 * 1024 * 1024 })];
        const m = await createMessenger({ transports, healthCheck: false });
        open.push(m);
        return m;
      };
      const server = await node(true);
      const client = await node(false);
      let got = 0;
      server.on('x', () => {
        got++;
      });
      const peer = await client.connect(server.addresses[0]!);
      let admitted = 0;
      for (let i = 0; i < 2_000; i++) if (client.send(peer.id, 0, 'x', new Uint8Array(400)) === true) admitted++;
      expect(admitted).toBe(2_000);
      await client.close();
      await waitFor(() => server.peers().length === 0, 5_000, 'the server to see the link end');
      expect(got).toBe(2_000);
    });
  }
});

describe('WebSocket client leaves nothing pending after close', () => {
  it('a dial waiting to reconnect keeps no timer alive once the messenger is closed', async () => {
    // Every timer created during the test; afterwards none may still be pending and keep the process alive.
    interface TimerLike {
      hasRef(): boolean;
      _destroyed?: boolean;
      _idleTimeout?: number;
    }
    const created: TimerLike[] = [];
    const hook = createHook({
      init(_id, type, _trigger, resource) {
        if (type === 'Timeout') created.push(resource as TimerLike);
      },
    });
    const alive = (): TimerLike[] =>
      created.filter((t) => t.hasRef() && t._destroyed !== true && (t._idleTimeout ?? -1) >= 0);
    hook.enable();
    try {
      const server = await createMessenger({
        transports: [webSocketServerTransport({ closeGraceMs: 200 })],
        healthCheck: false,
      });
      const client = await createMessenger({
        transports: [
          webSocketClientTransport({
            WebSocket: WebSocket as never,
            minReconnectionDelay: 20_000,
            reconnectionJitter: 0,
          }),
        ],
        healthCheck: false,
      });
      open.push(server, client);
      await client.connect(server.addresses[0]!);
      const gone = nextGone(client);
      server.disconnect(client.self.id);
      await within(gone, 5_000, 'the client seeing the server drop it');
      // The dial now waits 20 s before reconnecting. Closing must cancel that wait.
      await client.close();
      await server.close();
      // Close handshakes finish within a few ms; after that nothing pending may remain.
      await waitFor(() => alive().length === 0, 2_000, "no pending ref'd timers");
      expect(alive()).toEqual([]);
    } finally {
      hook.disable();
    }
  });
});
