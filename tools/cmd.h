/* The lmq subcommands. Each lives in tools/cmd_<name>.c, parses its own arguments,
 * prints, and returns the process exit status. */
#ifndef LMQ_CMD_H
#define LMQ_CMD_H

int cmd_convert(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_manifest(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_outliers(int argc, char **argv);
int cmd_budget(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif
