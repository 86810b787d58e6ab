// libqrencode: the browser link drawn as a QR code on the presenter's terminal.
#include <qrencode.h>
