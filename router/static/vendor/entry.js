// The pieces of CodeMirror 6 the playground uses, as one global: window.CM
export { EditorView, basicSetup } from "codemirror";
export { EditorState, StateField, StateEffect, Prec } from "@codemirror/state";
export { Decoration, WidgetType, keymap } from "@codemirror/view";
export { python } from "@codemirror/lang-python";
export { javascript } from "@codemirror/lang-javascript";
export { indentUnit } from "@codemirror/language";
