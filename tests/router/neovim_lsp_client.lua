-- Neovim (a real editor) as the LSP client: it starts `complement lsp`, reads the server's
-- capabilities as an editor does, and asks for inline completions only if advertised.
local out = os.getenv("NVIM_TEST_OUT")
local typed = vim.fn.json_decode(os.getenv("NVIM_TEST_TYPED"))
local result = {advertised = false, asked = 0, shown = nil, error = nil}
local function finish()
  vim.fn.writefile({vim.fn.json_encode(result)}, out)
  vim.cmd("qa!")
end
local ok, err = pcall(function()
  local id = vim.lsp.start_client({
    name = "complement",
    cmd = {os.getenv("NVIM_TEST_PYTHON"), "-m", "router.cli", "lsp", "--config",
           os.getenv("NVIM_TEST_CONFIG")},
    cmd_cwd = os.getenv("NVIM_TEST_REPO"),
    root_dir = os.getenv("NVIM_TEST_REPO"),
    flags = {debounce_text_changes = 0},
  })
  assert(id, "the language server did not start")
  local buf = vim.api.nvim_create_buf(true, false)
  vim.api.nvim_buf_set_name(buf, os.getenv("NVIM_TEST_FILE"))
  vim.api.nvim_buf_set_option(buf, "filetype", "python")
  vim.api.nvim_set_current_buf(buf)
  vim.lsp.buf_attach_client(buf, id)
  local client
  assert(vim.wait(120000, function()
    client = vim.lsp.get_client_by_id(id)
    return client ~= nil and client.server_capabilities ~= nil
  end, 100), "no initialize answer")
  result.advertised = client.server_capabilities.inlineCompletionProvider ~= nil
    and client.server_capabilities.inlineCompletionProvider ~= false
  if not result.advertised then return end  -- an editor asks only for what is advertised
  for cut = 20, #typed do
    local text = string.sub(typed, 1, cut)
    local lines = vim.split(text, "\n", {plain = true})
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    local params = {textDocument = {uri = vim.uri_from_bufnr(buf)},
                    position = {line = #lines - 1, character = #lines[#lines]},
                    context = {triggerKind = 2}}
    local answer, e = client.request_sync("textDocument/inlineCompletion", params, 30000, buf)
    result.asked = result.asked + 1
    assert(answer, "no answer: " .. tostring(e))
    assert(answer.err == nil, vim.inspect(answer.err))
    local items = answer.result and (answer.result.items or answer.result) or {}
    if #items > 0 then
      result.shown = items[1].insertText
      if type(result.shown) == "table" then result.shown = result.shown.value end
      return
    end
  end
end)
if not ok then result.error = tostring(err) end
finish()
