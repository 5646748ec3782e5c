/**
 * A minimal React chat page on the AI SDK's `useChat`, carried by lanemux: the page's client
 * (`lanemux/client`) dials the server over WebSocket (`?server=ws://…`) and hands `useChat` a
 * `lanemuxChatTransport`. Written
 * with `createElement` so the repo needs no JSX settings.
 */
import { useChat } from '@ai-sdk/react';
import { createElement as h, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { lanemuxChatTransport } from '../../src/ai/index.ts';
import { connect } from '../../src/client.ts';

const server = new URLSearchParams(location.search).get('server') ?? '';
const client = await connect(server);
const transport = lanemuxChatTransport({ client, storage: sessionStorage });

function App() {
  const { messages, sendMessage, status, error } = useChat({ id: 'chat-1', transport });
  const [input, setInput] = useState('');
  return h(
    'main',
    null,
    h(
      'ul',
      { id: 'messages' },
      messages.map((m) =>
        h('li', { key: m.id, 'data-role': m.role }, m.parts.map((p) => (p.type === 'text' ? p.text : '')).join('')),
      ),
    ),
    h('p', { id: 'status' }, error ? `error: ${error.message}` : status),
    h('input', { id: 'input', value: input, onChange: (e: { target: { value: string } }) => setInput(e.target.value) }),
    h(
      'button',
      {
        id: 'send',
        type: 'button',
        onClick: () => {
          void sendMessage({ text: input });
          setInput('');
        },
      },
      'Send',
    ),
  );
}

createRoot(document.getElementById('root')!).render(h(App));
document.body.dataset['ready'] = '1';
