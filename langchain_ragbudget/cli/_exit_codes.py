"""The exit codes of `ragbudget` (documented for users in the parser's epilog)."""

EXIT_OK = 0
EXIT_PARTIAL = 1  # the command ran; some items failed and were reported
EXIT_USAGE = 2  # bad arguments, configuration, input or file (argparse's code too)
EXIT_UNEXPECTED = 3  # anything else: a bug to report, with --debug's traceback
EXIT_BROKEN_PIPE = 141  # stdout closed early (`ragbudget ... | head`): 128 + SIGPIPE
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT
