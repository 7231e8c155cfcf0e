// `paratwin tokenize TEXT -o FILE.bin`: byte-level tokens of a text file, in llm.c's token file layout.
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "exec/data/token_file.hpp"

namespace paratwin::cli {

void add_tokenize_command(CLI::App& app, int& exit_status) {
  struct Options {
    std::string text, output;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("tokenize", "turn a text file into byte-level tokens (llm.c .bin layout)");
  cmd->add_option("text", opts->text, "text file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", opts->output, "token file to write")->required()->type_name("FILE.bin");
  cmd->callback([opts, &exit_status] {
    std::ifstream in(opts->text, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const auto tokens = exec::tokenize_bytes(text.str());
    exec::write_token_file(opts->output, tokens);
    std::cout << opts->output << ": " << tokens.size() << " tokens (byte-level, vocabulary 256)\n";
    exit_status = kExitOk;
  });
}

}  // namespace paratwin::cli
