#!/usr/bin/env bash
# Renders the benchmark's screen content into OUTDIR (no downloads; ImageMagick + ffmpeg):
#   slides.bgrx  4 full-screen slides (text, diagram, chart, code), stacked: 1920 x 4*1080
#   motion.bgrx  60 frames of a circular pan over a plasma texture with a testsrc2 inset
#   scroll.bgrx  a 3240-row page of source code plus its first 1080 rows again (seamless scroll)
#   clip.bgrx    60 frames of slide 1 with a 640x360 testsrc2 clip playing at 1240,600
# and for each NAME.bgrx a NAME.yuv: the same pictures converted to yuv420p by ffmpeg (the
# reference for PSNR). Idempotent: skipped when OUTDIR/.stamp matches this script's checksum.
#   make-content.sh OUTDIR REPO_ROOT
set -euo pipefail
out="$1"; repo="$2"
W=1920 H=1080 SCROLL_PERIOD=3240
stamp="$(sha256sum "$0" | cut -d' ' -f1)"
[[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$stamp" ]] && exit 0
mkdir -p "$out"
rm -f "$out/.stamp"
tmp="$out/render"; rm -rf "$tmp"; mkdir -p "$tmp"

title() { # title FILE TEXT: white page with a blue title bar
    convert -size ${W}x${H} xc:white -fill '#1a3d7c' -draw "rectangle 0,0 $W,150" \
        -font DejaVu-Sans-Bold -pointsize 64 -fill white -annotate +80+100 "$2" \
        -fill '#888888' -font DejaVu-Sans -pointsize 24 -annotate +80+1050 "screenshare benchmark — $(basename "$1" .png)" "$1"
}

# 1: bullets.
title "$tmp/s1.png" "Screen sharing at 1080p"
convert "$tmp/s1.png" -font DejaVu-Sans -pointsize 44 -fill black \
    -annotate +120+290 "• Capture the X11 screen with MIT-SHM; skip unchanged frames (XDamage)" \
    -annotate +120+380 "• Convert BGRA → I420 with libyuv, keep the aspect ratio" \
    -annotate +120+470 "• Encode VP8 (libvpx realtime, screen-content mode)" \
    -annotate +120+560 "• Packetize per RFC 7741, send RTP/UDP, RTCP SR/BYE" \
    -fill '#b03030' -annotate +120+680 "Goal: sharp text at 2 Mbit/s, low CPU, low latency" \
    -font DejaVu-Sans -pointsize 28 -fill '#333333' \
    -annotate +160+780 "Slides change every 5 s; between changes the screen is still." \
    -annotate +160+830 "A good sender refines quality, then idles at a keep-alive rate." "$tmp/s1.png"
# 2: pipeline diagram.
title "$tmp/s2.png" "Pipeline"
args=()
x=90
for label in X11 libyuv libvpx RTP UDP; do
    args+=(-fill '#dfe8f7' -stroke '#1a3d7c' -strokewidth 4 -draw "roundrectangle $x,420 $((x+250)),580 20,20"
           -stroke none -fill '#1a3d7c' -font DejaVu-Sans-Bold -pointsize 40 -annotate +$((x+40))+515 "$label")
    if ((x < 1400)); then
        args+=(-stroke '#333333' -strokewidth 6 -draw "line $((x+255)),500 $((x+345)),500"
               -stroke none -fill '#333333' -draw "polygon $((x+345)),485 $((x+370)),500 $((x+345)),515")
    fi
    x=$((x+370))
done
convert "$tmp/s2.png" "${args[@]}" -fill '#2e7d32' -draw "circle 960,800 960,740" \
    -font DejaVu-Sans -pointsize 34 -fill black -annotate +1050+815 "viewers: ffmpeg, GStreamer, browsers" \
    -stroke '#2e7d32' -strokewidth 5 -draw "line 1695,585 1010,760" "$tmp/s2.png"
# 3: bar chart.
title "$tmp/s3.png" "CPU per stream (lower is better)"
args=(-stroke black -strokewidth 3 -draw "line 200,950 1750,950" -draw "line 200,950 200,250" -stroke none)
colors=('#1a3d7c' '#c0392b' '#27ae60' '#8e44ad' '#f39c12' '#16a085')
heights=(520 610 380 660 290 450)
for i in 0 1 2 3 4 5; do
    x0=$((280 + i*240)); h=${heights[$i]}
    args+=(-fill "${colors[$i]}" -draw "rectangle $x0,$((950-h)) $((x0+150)),950"
           -fill black -font DejaVu-Sans -pointsize 30 -annotate +$((x0+30))+$((935-h)) "$((h/10))%"
           -annotate +$((x0+20))+1000 "run $((i+1))")
done
for y in 350 550 750; do args+=(-stroke '#bbbbbb' -strokewidth 1 -draw "line 205,$y 1750,$y" -stroke none); done
convert "$tmp/s3.png" "${args[@]}" "$tmp/s3.png"
# 4: dense code and a table.
title "$tmp/s4.png" "Code and numbers"
# (ImageMagick's Debian policy forbids @file text: pass it inline, '%' escaped.)
code="$(sed -n '1,34p' "$repo/bench/tools/xloop.c" | sed 's/%/%%/g')"
convert "$tmp/s4.png" -fill '#f4f4f4' -draw "rectangle 50,175 1120,1020" \
    -fill '#202020' -font DejaVu-Sans-Mono -pointsize 19 -interline-spacing 2 -annotate +60+200 " $code" \
    -fill none -stroke '#444444' -strokewidth 2 -draw "rectangle 1160,200 1860,700" \
    -draw "line 1160,283 1860,283" -draw "line 1400,200 1400,700" -stroke none -fill black \
    -font DejaVu-Sans-Bold -pointsize 30 -annotate +1180+255 "tool" -annotate +1420+255 "fps   kbps   dB" \
    -font DejaVu-Sans-Mono -pointsize 28 -annotate +1180+340 "alpha" -annotate +1420+340 "15.0  1980  41.2" \
    -annotate +1180+420 "beta" -annotate +1420+420 "14.8  2012  39.7" \
    -annotate +1180+500 "gamma" -annotate +1420+500 " 7.1   860  44.0" \
    -annotate +1180+580 "delta" -annotate +1420+580 "29.9  2100  35.3" "$tmp/s4.png"
for i in 1 2 3 4; do convert "$tmp/s$i.png" -alpha off -depth 8 "BGRA:$tmp/s$i.bgrx"; done
cat "$tmp"/s{1,2,3,4}.bgrx >"$out/slides.bgrx"

# Motion: a circular pan (every pixel moves every frame) over a plasma texture, with a
# 640x360 testsrc2 inset; loops seamlessly after 60 frames (2 s at 30 fps).
convert -seed 7 -size 2400x1400 plasma:fractal -blur 0x1.5 "$tmp/plasma.png"
ffmpeg -nostdin -loglevel error -y -loop 1 -framerate 30 -i "$tmp/plasma.png" \
    -f lavfi -i "testsrc2=size=640x360:rate=30" -filter_complex \
    "[0:v]crop=$W:$H:x='240+160*cos(2*PI*n/60)':y='160+120*sin(2*PI*n/60)'[bg];[bg][1:v]overlay=80:80,format=bgr0" \
    -frames:v 60 -f rawvideo "$out/motion.bgrx"

# Clip: a video playing in a still slide (slide 1, the clip at 1240,600: not on macroblock
# boundaries, as a window put anywhere); xloop -R puts only the clip's rectangle after the first
# picture, so only it is damaged. Loops after 60 frames.
ffmpeg -nostdin -loglevel error -y -loop 1 -framerate 30 -i "$tmp/s1.png" \
    -f lavfi -i "testsrc2=size=640x360:rate=30" -filter_complex "[0:v][1:v]overlay=1240:600,format=bgr0" \
    -frames:v 60 -f rawvideo "$out/clip.bgrx"

# Scroll: source code, black on white, 27 px per line, 120 lines per period.
text="$(find "$repo/Sources" -name '*.swift' | sort | xargs cat | expand -t 4 | awk 'NR <= 120' | sed 's/%/%%/g')"
convert -size ${W}x${SCROLL_PERIOD} xc:white -font DejaVu-Sans-Mono -pointsize 20 -fill black \
    -interline-spacing 3 -annotate +40+24 " $text" "$tmp/page.png"
convert "$tmp/page.png" \( "$tmp/page.png" -crop ${W}x${H}+0+0 +repage \) -append -alpha off -depth 8 \
    "BGRA:$out/scroll.bgrx"

# References for PSNR: yuv420p by ffmpeg (BT.601, limited range, like the senders).
ffmpeg -nostdin -loglevel error -y -f rawvideo -pix_fmt bgr0 -s ${W}x${H} -i "$out/slides.bgrx" \
    -pix_fmt yuv420p -f rawvideo "$out/slides.yuv"
ffmpeg -nostdin -loglevel error -y -f rawvideo -pix_fmt bgr0 -s ${W}x${H} -i "$out/motion.bgrx" \
    -pix_fmt yuv420p -f rawvideo "$out/motion.yuv"
ffmpeg -nostdin -loglevel error -y -f rawvideo -pix_fmt bgr0 -s ${W}x${H} -i "$out/clip.bgrx" \
    -pix_fmt yuv420p -f rawvideo "$out/clip.yuv"
ffmpeg -nostdin -loglevel error -y -f rawvideo -pix_fmt bgr0 -s ${W}x$((SCROLL_PERIOD + H)) -i "$out/scroll.bgrx" \
    -pix_fmt yuv420p -f rawvideo "$out/scroll.yuv"
cp "$tmp"/s{1,2,3,4}.png "$out/"
rm -rf "$tmp"
echo "$stamp" >"$out/.stamp"
