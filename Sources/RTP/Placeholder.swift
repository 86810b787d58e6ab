// RTP
