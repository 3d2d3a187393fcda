#!/bin/sh
# Rebuilds voice_hello.ogg: a real 2-second Telegram-style voice note (OGG/Opus, mono, 12 kbit/s)
# of a synthetic voice saying the sentence below. Debian: apt-get install espeak-ng opus-tools.
# The tests only read the committed file; nothing runs this at test time.
set -eu
cd "$(dirname "$0")"
espeak-ng -v en-us -s 150 -w /tmp/voice_hello.wav "I went to the park yesterday"
opusenc --quiet --bitrate 12 --downmix-mono --comment TITLE=memora-test /tmp/voice_hello.wav voice_hello.ogg
rm -f /tmp/voice_hello.wav
