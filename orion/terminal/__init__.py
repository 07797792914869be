"""The terminal: ``orion chat`` (the chat loop, its screen, prompt and rendering) and the
consoles every command prints through. Only the command line (:mod:`orion.cli`) imports it;
the runtime, the engine and the plugins never do."""
