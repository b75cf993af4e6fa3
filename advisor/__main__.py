from advisor.cli import console_main

console_main()
