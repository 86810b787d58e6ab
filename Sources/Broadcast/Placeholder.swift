// Broadcast
