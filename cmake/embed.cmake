# Turn a file into a C source that defines `const char NAME[]` (with a
# terminating NUL) and `const unsigned long NAME_len`, so a page can be
# edited as HTML and still be served from the binary without files.
#   cmake -DIN=page.html -DOUT=page.c -DNAME=em_monitor_page -P embed.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE "${OUT}" "/* Generated from ${IN} by cmake/embed.cmake; do not edit. */\n"
  "const char ${NAME}[] = {\n${body}0x00};\nconst unsigned long ${NAME}_len = ${len};\n")
