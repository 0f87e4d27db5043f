import socket,time,sys
port=int(sys.argv[1]); n=int(sys.argv[2]); path=sys.argv[3] if len(sys.argv)>3 else '/metrics'
ss=[]
for i in range(n):
    s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096); s.connect(("127.0.0.1",port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()); ss.append(s)
t0=time.time()
time.sleep(float(sys.argv[4]) if len(sys.argv)>4 else 40)
