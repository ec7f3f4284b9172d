package tools

import (
	"encoding/json"
	"fmt"
)

// Formats of GET /v1/tools.
const (
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
)

// OpenAIFunction is a tool in the OpenAI style (Chat Completions'
// "tools" array).
type OpenAIFunction struct {
	Type     string         `json:"type"` // "function"
	Function OpenAIFuncBody `json:"function"`
}

// OpenAIFuncBody is the function of an OpenAIFunction.
type OpenAIFuncBody struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// AnthropicTool is a tool in the Anthropic style (the Messages API's
// "tools" array).
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Definitions returns the table as function definitions in format.
func Definitions(format string) (any, error) {
	switch format {
	case FormatOpenAI, "":
		out := make([]OpenAIFunction, len(tools()))
		for i, t := range tools() {
			out[i] = OpenAIFunction{Type: "function", Function: OpenAIFuncBody{Name: t.Name, Description: t.Description, Parameters: t.Schema}}
		}
		return out, nil
	case FormatAnthropic:
		out := make([]AnthropicTool, len(tools()))
		for i, t := range tools() {
			out[i] = AnthropicTool{Name: t.Name, Description: t.Description, InputSchema: t.Schema}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown format %q: use %s or %s", truncate(format, 50), FormatOpenAI, FormatAnthropic)
}
