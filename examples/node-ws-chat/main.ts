// Four chats at once over one connection: each is a call whose tokens render as they arrive.
import { connect } from 'lanemux/client'; // the page's entry: one server, calls, resume

const server = new URLSearchParams(location.search).get('server') ?? 'ws://127.0.0.1:8080/lanemux';
const client = await connect(server);

async function chat(prompt: string): Promise<void> {
  const li = document.createElement('li');
  document.getElementById('chats')!.append(li);
  for await (const token of client.stream<string>('generate', { prompt })) li.textContent += token;
  li.dataset['done'] = 'true';
}
await Promise.all(['Hello', 'Bonjour', 'Hola', 'Ciao'].map(chat));
