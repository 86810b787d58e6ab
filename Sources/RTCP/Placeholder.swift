// RTCP
